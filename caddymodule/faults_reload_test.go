package caddymodule

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokentap/tokentap/internal/simulator"
)

// reloadSite has two tokentap handlers in front of the simulator, so the
// shared providers have two holders per config; STALL changes with every
// reload so that each load is a new config. The simulator is not in it:
// see startReloadSimulator.
const reloadSite = `
http://` + faultsProxyAddr + ` {
	bind 127.0.0.1
	handle_path /sim/* {
		tokentap {
			stall_threshold STALL
		}
		reverse_proxy ` + faultsSimAddr + `
	}
	handle_path /sim2/* {
		tokentap {
			max_event_size 2MiB
		}
		reverse_proxy ` + faultsSimAddr + `
	}
}
`

// startReloadSimulator serves the simulator (72 tokens at 12 per second
// after 50 ms) on faultsSimAddr from a net/http server of the test's own,
// outside the Caddy config that the test reloads. As a site of that config
// its listener was replaced with every reload, which could reset the
// proxy's connection to it: a 502 from the test's upstream, not from
// tokentap. Production upstreams are not reloaded with the proxy.
//
// It returns a function that closes the simulator's idle connections: the
// reverse_proxy transports of configs replaced while a stream ran keep the
// stream's connection once it ends, until Caddy's keep-alive timeout (2
// minutes), and their goroutines would count against tokentap's baseline.
// Closing them from the upstream's side stands in for that timeout, as the
// reloaded simulator's shutdown did.
func startReloadSimulator(t *testing.T) (closeIdle func()) {
	t.Helper()
	sim := &simulator.Handler{Profile: simulator.Profile{
		TimeToFirstToken: caddy.Duration(50 * time.Millisecond), TokensPerSecond: 12, OutputTokens: 72,
	}}
	if err := sim.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	if err := sim.Validate(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", faultsSimAddr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := sim.ServeHTTP(w, r, nil); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return func() { srv.SetKeepAlivesEnabled(false) }
}

// errNoResponse marks a request that got no response at all: its
// connection failed before any answer.
var errNoResponse = errors.New("no response")

// reloads is how many times TestReloadsUnderStreams reloads the config.
const reloads = 50

// TestReloadsUnderStreams reloads the config 50 times through the admin
// API (POST /load) while streams run, some started before the first reload
// and some between reloads: every stream arrives byte for byte as the
// simulator sends it and its span is exported, and afterwards the shared
// TracerProvider and MeterProvider are held by exactly the running config's
// two handlers and the goroutines are back to their baseline.
func TestReloadsUnderStreams(t *testing.T) {
	sink := startFaultsExport(t)
	site := func(i int) string { return strings.ReplaceAll(reloadSite, "STALL", fmt.Sprintf("%dms", 1000+i)) }
	// Streams must outlive reloads: the old servers wait for them.
	fc := startFaultsCaddyGrace(t, site(0), "60s")
	// After Caddy has checked that the ports are free; every stream has
	// ended by the time the simulator stops, before Caddy does.
	closeSimIdle := startReloadSimulator(t)

	client := faultsClient()
	defer client.CloseIdleConnections()
	body := func(i int) string {
		return fmt.Sprintf(`{"model":"reload-%d","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"reload %d"}]}`, i, i)
	}
	get := func(url, body string, tc *traceContext) ([]byte, error) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if tc != nil {
			req.Header.Set("traceparent", tc.header)
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errNoResponse, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("status %d", resp.StatusCode)
		}
		return io.ReadAll(resp.Body)
	}
	if _, err := get(faultsProxyURL+"/sim/v1/chat/completions", body(-1), nil); err != nil {
		t.Fatal(err)
	}
	client.CloseIdleConnections()
	time.Sleep(200 * time.Millisecond)
	baseline := runtime.NumGoroutine()

	type stream struct {
		i    int
		path string
		tc   traceContext
		got  []byte
		err  error
		// spare holds the trace contexts for tries after a connection
		// reset before any answer; reset, those of the tries so reset.
		spare, reset []traceContext
	}
	var (
		mu      sync.Mutex
		streams []*stream
		wg      sync.WaitGroup
	)
	start := func(i int) {
		s := &stream{i: i, path: []string{"/sim", "/sim2"}[i%2], tc: newTraceContext(t),
			spare: []traceContext{newTraceContext(t), newTraceContext(t)}}
		mu.Lock()
		streams = append(streams, s)
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				s.got, s.err = get(faultsProxyURL+s.path+"/v1/chat/completions", body(i), &s.tc)
				// On Linux each config binds its own SO_REUSEPORT socket,
				// and a connection the kernel queued on the old one as it
				// closes is reset before Caddy accepts it
				// (docs/RELIABILITY.md): the listener's doing, before any
				// handler. Such a request is tried again on a new trace,
				// and the check below proves that tokentap never saw it.
				if !errors.Is(s.err, errNoResponse) || len(s.spare) == 0 {
					return
				}
				s.reset = append(s.reset, s.tc)
				s.tc, s.spare = s.spare[0], s.spare[1:]
			}
		}()
	}
	for i := 0; i < 8; i++ {
		start(i)
	}
	time.Sleep(200 * time.Millisecond)
	began := time.Now()
	admin := &http.Client{Timeout: 30 * time.Second}
	for r := 1; r <= reloads; r++ {
		resp, err := admin.Post("http://"+faultsAdminAddr+"/load", "text/caddyfile", strings.NewReader(fc.config(site(r))))
		if err != nil {
			t.Fatalf("reload %d: %v", r, err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("reload %d: %d %s", r, resp.StatusCode, msg)
		}
		if r%5 == 0 {
			start(7 + r/5)
		}
		time.Sleep(60 * time.Millisecond)
	}
	reloadTime := time.Since(began)
	wg.Wait()

	// What the simulator sends for each request, fetched all at once.
	wants := make([][]byte, len(streams))
	wantErrs := make([]error, len(streams))
	var fetches sync.WaitGroup
	for k, s := range streams {
		fetches.Go(func() { wants[k], wantErrs[k] = get(faultsSimURL+"/v1/chat/completions", body(s.i), nil) })
	}
	fetches.Wait()
	for k, s := range streams {
		if s.err != nil {
			t.Errorf("stream %d: %v", s.i, s.err)
			continue
		}
		want, err := wants[k], wantErrs[k]
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(s.got, want) {
			t.Errorf("stream %d: %d bytes (sha256 %x), the simulator sends %d (sha256 %x)", s.i, len(s.got), sha256Of(s.got)[:6], len(want), sha256Of(want)[:6])
		}
		a := waitSpan(t, sink, s.tc, 15*time.Second).Attributes
		if a["tokentap.outcome"] != "completed" || a["gen_ai.usage.output_tokens"] != int64(72) {
			t.Errorf("stream %d: span outcome %v, output tokens %v", s.i, a["tokentap.outcome"], a["gen_ai.usage.output_tokens"])
		}
	}
	// A request reset before any answer reached no handler: tokentap ends
	// a span for every request it sees, and a span of the reset try would
	// have ended, and been exported, before that of the stream's own
	// retry, which was waited for above.
	resets := 0
	for _, s := range streams {
		for _, tc := range s.reset {
			resets++
			for _, sp := range sink.Spans() {
				if sp.TraceID == tc.traceID {
					t.Errorf("stream %d: its connection was reset before any answer, yet tokentap made a span for it (outcome %v)", s.i, sp.Attributes["tokentap.outcome"])
				}
			}
		}
	}

	// The running config's two handlers hold each provider; every
	// earlier config's handlers have let go.
	client.CloseIdleConnections()
	closeSimIdle()
	var traceRefs, meterRefs, n int
	deadline := time.Now().Add(20 * time.Second)
	for {
		traceRefs, meterRefs = providerRefs()
		n = runtime.NumGoroutine()
		if traceRefs == 2 && meterRefs == 2 && n <= baseline+4 {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 4<<20)
			t.Fatalf("after %d reloads: %d TracerProvider and %d MeterProvider references (want 2 each), %d goroutines (baseline %d)\n%s",
				reloads, traceRefs, meterRefs, n, baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d reloads in %v under %d streams (%v each): every stream identical to the simulator's and its span exported; "+
		"%d connections reset by a closing listener before any handler, and tried again; "+
		"providers held by %d and %d handlers; goroutines %d, baseline %d",
		reloads, reloadTime.Round(time.Millisecond), len(streams), 72/12*time.Second, resets, traceRefs, meterRefs, n, baseline)
}
