package simulator

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// linesTimed posts body to target and records when each line of the
// response (up to and including its "\n") reached the client; a last line
// without one is recorded at EOF.
func linesTimed(t *testing.T, url, body string, header http.Header) []arrival {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out []arrival
	br := bufio.NewReader(res.Body)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			out = append(out, arrival{at: time.Since(start), data: line})
		}
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestFormatsTimingOverLoopback checks, for every format, that a client
// sees each content event at its scheduled time and the planned decode
// rate: the formats share the scheduler, but each writes and flushes its
// own events, and an event buffered behind the next would show here.
func TestFormatsTimingOverLoopback(t *testing.T) {
	requireQuietMachine(t)
	const (
		ttft       = 50 * time.Millisecond
		rate       = 150.0
		tokens     = 30
		firstSlack = 5 * time.Millisecond
		tokenSlack = 10 * time.Millisecond
		// streams per format, of which a majority must be on schedule
		// (see TestTimingOverLoopback).
		streams = 5
	)
	h := &Handler{Profile: Profile{TimeToFirstToken: caddy.Duration(ttft), TokensPerSecond: rate, OutputTokens: tokens}}
	if err := h.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = h.ServeHTTP(w, r, nil)
	}))
	t.Cleanup(srv.Close)
	for _, f := range wireFormats {
		t.Run(f.name, func(t *testing.T) {
			plan := planTarget(t, h, f.target, f.stream, nil)
			// Warm the keep-alive connection so that no dial is timed.
			linesTimed(t, srv.URL+f.target, f.stream, http.Header{HeaderOutputTokens: {"1"}, HeaderTimeToFirstToken: {"0s"}})
			var within int
			var lastMisses []string
			for stream := 1; stream <= streams; stream++ {
				var got []time.Duration
				for _, l := range linesTimed(t, srv.URL+f.target, f.stream, nil) {
					if f.isContent(l.data) {
						got = append(got, l.at)
					}
				}
				if len(got) != tokens {
					t.Fatalf("%d content lines, want %d", len(got), tokens)
				}
				var misses []string
				for i, at := range got {
					d := at - plan.Offsets[i]
					if d < -time.Millisecond {
						// Load only delays a token: one early is the
						// simulator's error, whatever the machine did.
						t.Errorf("stream %d: token %d arrived at %v, before its schedule %v", stream, i, at, plan.Offsets[i])
					}
					if d > tokenSlack || (i == 0 && d > firstSlack) {
						misses = append(misses, fmt.Sprintf("token %d arrived at %v, scheduled %v", i, at, plan.Offsets[i]))
					}
				}
				observed := float64(tokens-1) / (got[tokens-1] - got[0]).Seconds()
				if math.Abs(observed/plan.DecodeRate()-1) > 0.02 {
					misses = append(misses, fmt.Sprintf("observed decode rate %.2f, planned %.2f", observed, plan.DecodeRate()))
				}
				t.Logf("stream %d: first token at %v (scheduled %v), rate %.2f tok/s (planned %.2f), %d late",
					stream, got[0], plan.TimeToFirstToken(), observed, plan.DecodeRate(), len(misses))
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
