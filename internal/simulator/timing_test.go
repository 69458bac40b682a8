package simulator

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokentap/tokentap/sse"
)

// arrival is when one SSE event reached the client, from just before the
// request was sent.
type arrival struct {
	at   time.Duration
	data string
}

// loopback serves h on a real loopback server, so timings include the
// kernel and net/http as a proxy in front would see them. done is closed
// whenever a ServeHTTP call returns.
func loopback(t *testing.T, h *Handler) (srv *httptest.Server, done chan struct{}) {
	t.Helper()
	done = make(chan struct{}, 16)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { done <- struct{}{} }()
		_ = h.ServeHTTP(w, r, nil)
	}))
	t.Cleanup(srv.Close)
	return srv, done
}

// streamTimed posts body and records each event's arrival; it returns the
// response with its body consumed, so that its trailers are in place.
func streamTimed(t *testing.T, srv *httptest.Server, body string, header http.Header) (*http.Response, []arrival) {
	t.Helper()
	req, err := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	start := time.Now()
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var evs []arrival
	readEvents(t, res.Body, func(ev *sse.Event, read time.Time) bool {
		evs = append(evs, arrival{at: read.Sub(start), data: string(ev.Data)})
		return true
	})
	return res, evs
}

// readEvents reads body through sse.Decoder, handing each event to each
// with the time of the read that completed it, until body ends or each
// returns false. It fails the test on a read error and on an event the
// decoder skipped for its size.
func readEvents(t *testing.T, body io.Reader, each func(ev *sse.Event, read time.Time) bool) {
	t.Helper()
	var (
		d    sse.Decoder
		read time.Time
		more = true
	)
	d.OnEvent = func(ev *sse.Event) {
		if more {
			more = each(ev, read)
		}
	}
	buf := make([]byte, 4096)
	for more {
		n, err := body.Read(buf)
		read = time.Now()
		d.Write(buf[:n])
		if err == io.EOF {
			d.Close()
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := d.Stats().Oversized; n > 0 {
		t.Fatalf("%d events over the decoder's size cap", n)
	}
}

// contentArrivals picks the arrivals of content chunks.
func contentArrivals(evs []arrival) []time.Duration {
	var out []time.Duration
	for _, e := range evs {
		if strings.Contains(e.data, `"delta":{"content":`) {
			out = append(out, e.at)
		}
	}
	return out
}

func trailerSeconds(t *testing.T, res *http.Response, name string) time.Duration {
	t.Helper()
	f, err := strconv.ParseFloat(res.Trailer.Get(name), 64)
	if err != nil {
		t.Fatalf("trailer %s: %v (trailers %v)", name, err, res.Trailer)
	}
	return time.Duration(math.Round(f * float64(time.Second)))
}

func TestTimingOverLoopback(t *testing.T) {
	requireQuietMachine(t)
	const (
		ttft   = 100 * time.Millisecond
		rate   = 100.0
		tokens = 30
		// Slack for loopback, scheduling and the race detector. The
		// handler schedules by absolute deadlines, so lateness does not
		// add up along the stream.
		firstSlack = 5 * time.Millisecond
		tokenSlack = 10 * time.Millisecond
		// A busy machine can delay a delivery, never advance one: of
		// streams streams, a majority must be on schedule, not the best
		// of a few. A simulator that misses its schedule misses it in
		// every stream; if the machine makes a stream late with
		// probability p, independently, 3 of 5 are late with probability
		// 10·p³ (10⁻² at p = 0.1), where one stream would fail one run in
		// ten. A token early is an error in any stream.
		streams = 5
	)
	for _, tc := range []struct {
		name   string
		jitter float64
	}{
		{name: "even", jitter: 0},
		{name: "jittered", jitter: 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &Handler{Profile: Profile{
				TimeToFirstToken: caddy.Duration(ttft),
				TokensPerSecond:  rate,
				Jitter:           tc.jitter,
				OutputTokens:     tokens,
			}}
			if err := h.Provision(caddy.Context{}); err != nil {
				t.Fatal(err)
			}
			srv, _ := loopback(t, h)
			plan, err := h.Plan([]byte(streamBody), nil)
			if err != nil {
				t.Fatal(err)
			}
			// Open the keep-alive connection first, so that the
			// measured requests do not pay for the dial.
			warm := http.Header{HeaderOutputTokens: {"1"}, HeaderTimeToFirstToken: {"0s"}}
			streamTimed(t, srv, streamBody, warm)

			var within int
			var lastMisses []string
			for stream := 1; stream <= streams; stream++ {
				res, evs := streamTimed(t, srv, streamBody, nil)

				// The trailers carry the plan's schedule, exactly.
				if got := res.Trailer.Get(HeaderOutputTokens); got != strconv.Itoa(tokens) {
					t.Fatalf("output tokens trailer %q", got)
				}
				first := trailerSeconds(t, res, HeaderTimeToFirstToken)
				last := trailerSeconds(t, res, HeaderLastToken)
				if first != plan.TimeToFirstToken() || last != plan.LastToken() {
					t.Fatalf("trailers say %v..%v, plan %v..%v", first, last, plan.TimeToFirstToken(), plan.LastToken())
				}
				if first != ttft {
					t.Fatalf("time to first token trailer %v, want %v", first, ttft)
				}
				trailerRate := float64(tokens-1) / (last - first).Seconds()
				if tc.jitter == 0 && math.Abs(trailerRate-rate) > 1e-6 {
					t.Fatalf("trailer decode rate %v, want %v", trailerRate, rate)
				}
				if tc.jitter > 0 && trailerRate == rate {
					t.Fatalf("jitter left the decode rate at exactly %v", rate)
				}
				got := contentArrivals(evs)
				if len(evs) == 0 || !strings.Contains(evs[0].data, `"role":"assistant"`) || len(got) != tokens {
					t.Fatalf("stream of %d events, %d content chunks", len(evs), len(got))
				}

				// The client observes that schedule.
				var misses []string
				if evs[0].at > firstSlack {
					misses = append(misses, fmt.Sprintf("role chunk arrived at %v, not at once", evs[0].at))
				}
				for i, at := range got {
					d := at - plan.Offsets[i]
					if d < -time.Millisecond {
						t.Errorf("stream %d: token %d arrived at %v, before its schedule %v", stream, i, at, plan.Offsets[i])
					}
					if d > tokenSlack || (i == 0 && d > firstSlack) {
						misses = append(misses, fmt.Sprintf("token %d arrived at %v, scheduled %v", i, at, plan.Offsets[i]))
					}
				}
				observed := float64(tokens-1) / (got[tokens-1] - got[0]).Seconds()
				if math.Abs(observed/trailerRate-1) > 0.02 {
					misses = append(misses, fmt.Sprintf("observed decode rate %.2f, trailers say %.2f", observed, trailerRate))
				}
				t.Logf("stream %d: first token at %v (scheduled %v), observed rate %.2f tok/s (scheduled %.2f), %d late",
					stream, got[0], first, observed, trailerRate, len(misses))
				if len(misses) == 0 {
					within++
				} else {
					lastMisses = misses
				}
			}
			if within < majority(streams) {
				t.Errorf("%d of %d streams on schedule, want a majority; the last late one:\n%s", within, streams, strings.Join(lastMisses, "\n"))
			}
		})
	}
}

func TestClientGoneStopsHandler(t *testing.T) {
	h := &Handler{Profile: Profile{
		TimeToFirstToken: caddy.Duration(time.Millisecond),
		TokensPerSecond:  20,
		OutputTokens:     1000,
	}}
	if err := h.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}

	t.Run("mid-stream over loopback", func(t *testing.T) {
		srv, done := loopback(t, h)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions", strings.NewReader(streamBody))
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		readEvents(t, res.Body, func(*sse.Event, time.Time) bool {
			seen++
			return seen < 3
		})
		cancel()
		res.Body.Close()
		select {
		case <-done:
		case <-time.After(time.Second):
			t.Fatal("handler still running 1s after the client left")
		}
	})

	t.Run("waiting for the first token", func(t *testing.T) {
		slow := *h
		slow.TimeToFirstToken = caddy.Duration(time.Minute)
		ctx, cancel := context.WithCancel(context.Background())
		r := newRequest("POST", "/v1/chat/completions", plainBody, nil).WithContext(ctx)
		done := make(chan error, 1)
		go func() { done <- slow.ServeHTTP(httptest.NewRecorder(), r, nil) }()
		time.Sleep(20 * time.Millisecond)
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeHTTP returned %v for a client that left", err)
			}
		case <-time.After(time.Second):
			t.Fatal("handler still waiting 1s after the client left")
		}
	})
}

// requireQuietMachine skips a test that checks wall-clock timing unless it
// was asked for with TOKENTAP_TIMING_TESTS=1 and runs without the race
// detector: .ci/run runs the timing tests that way, alone, because other
// packages' tests competing for two cores would fail them for no fault of
// the code.
func requireQuietMachine(t *testing.T) {
	t.Helper()
	if raceEnabled || os.Getenv("TOKENTAP_TIMING_TESTS") != "1" {
		t.Skip("set TOKENTAP_TIMING_TESTS=1 and run alone, without -race (as .ci/run does)")
	}
}

// majority is the least count that is more than half of n.
func majority(n int) int { return n/2 + 1 }
