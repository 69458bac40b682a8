package loadgen

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/simulator"
)

func TestWarmCount(t *testing.T) {
	burst := func(ats ...time.Duration) []Planned {
		p := make([]Planned, len(ats))
		for i, at := range ats {
			p[i].At = at
		}
		return p
	}
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		cfg  Config
		want int
	}{
		{"a replay: the requests of its first second", Config{Concurrency: 256, Schedule: burst(0, 0, 0, 150*ms, 999*ms, time.Second, 3*time.Second)}, 5},
		{"a replay held to two in flight", Config{Concurrency: 2, Schedule: burst(0, 0, 0)}, 2},
		{"a constant rate of 10/s", Config{Concurrency: 256, Rate: 10, Requests: 100}, 10},
		{"a constant rate, fewer requests than a second's", Config{Concurrency: 256, Rate: 10, Requests: 3}, 3},
		{"warm-up requests count", Config{Concurrency: 256, Rate: 10, Requests: 3, Warmup: 2}, 5},
		{"a high rate, held to maxWarmConns", Config{Concurrency: 256, Rate: 1000, Requests: 5000}, maxWarmConns},
		{"poisson arrivals, drawn as the run draws them", Config{Concurrency: 256, Rate: 20, Requests: 1000, Arrival: ArrivalPoisson, Burstiness: 1, Seed: 7}, poissonDue(t, 20, 7)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := warmCount(&tc.cfg); got != tc.want {
				t.Errorf("warmCount = %d, want %d", got, tc.want)
			}
		})
	}
}

// poissonDue counts the requests a Poisson schedule of rate and seed has
// due in the first warmWindow, drawn independently of warmCount.
func poissonDue(t *testing.T, rate float64, seed uint64) int {
	t.Helper()
	s := newSchedule(&Config{Rate: rate, Arrival: ArrivalPoisson, Burstiness: 1, Seed: seed})
	n := 0
	for s.next() < warmWindow {
		n++
	}
	if n < 2 {
		t.Fatalf("the seed draws %d requests in the first second: pick one that draws more", n)
	}
	return n
}

// pipeDialer dials in-memory connections and counts its dials.
type pipeDialer struct {
	mu      sync.Mutex
	dials   int
	servers []net.Conn
}

func (p *pipeDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, s := net.Pipe()
	p.mu.Lock()
	p.dials++
	p.servers = append(p.servers, s)
	p.mu.Unlock()
	return c, nil
}

func TestWarmUp(t *testing.T) {
	noProxy := func(*http.Request) (*url.URL, error) { return nil, nil }
	viaProxy := func(*http.Request) (*url.URL, error) { return url.Parse("http://127.0.0.1:1") }
	replay := Config{URL: "http://127.0.0.1:9/v1", Concurrency: 8, Schedule: make([]Planned, 3)}
	for _, tc := range []struct {
		name   string
		cfg    Config
		proxy  func(*http.Request) (*url.URL, error)
		opened int
		addr   string
	}{
		{"a replay opens one per request due", replay, noProxy, 3, "127.0.0.1:9"},
		{"the scheme's port", Config{URL: "https://api.example.invalid/v1", Rate: 2, Requests: 4, Concurrency: 8}, noProxy, 2, "api.example.invalid:443"},
		{"closed loop opens none", Config{URL: "http://127.0.0.1:9/v1", Concurrency: 8, Requests: 8}, noProxy, 0, ""},
		{"a proxy between opens none", replay, viaProxy, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p pipeDialer
			tr := &http.Transport{DialContext: p.dial, Proxy: tc.proxy}
			d := warmUp(context.Background(), &tc.cfg, tr)
			if tc.opened == 0 {
				if d != nil || p.dials != 0 {
					t.Fatalf("warmUp opened %d connections, want none", p.dials)
				}
				return
			}
			if d == nil || p.dials != tc.opened || d.addr != tc.addr {
				t.Fatalf("warmUp opened %d (dialer %v), want %d to %s", p.dials, d, tc.opened, tc.addr)
			}
			defer d.close()
			for i := range tc.opened {
				if _, err := tr.DialContext(context.Background(), "tcp", tc.addr); err != nil || p.dials != tc.opened {
					t.Fatalf("dial %d: %v, %d dials; want one opened ahead", i, err, p.dials)
				}
			}
			if _, err := tr.DialContext(context.Background(), "tcp", tc.addr); err != nil || p.dials != tc.opened+1 {
				t.Fatalf("once those are used: %v, %d dials; want a new one", err, p.dials)
			}
			if _, err := tr.DialContext(context.Background(), "tcp", "127.0.0.1:10"); err != nil || p.dials != tc.opened+2 {
				t.Fatalf("another address: %v, %d dials; want a new one", err, p.dials)
			}
		})
	}
}

// TestWarmExpires checks that a connection opened ahead and not used within
// warmWindow is closed, not handed to a request that comes later.
func TestWarmExpires(t *testing.T) {
	var p pipeDialer
	tr := &http.Transport{DialContext: p.dial}
	d := warmUp(context.Background(), &Config{URL: "http://127.0.0.1:9/v1", Concurrency: 8, Schedule: make([]Planned, 2)}, tr)
	if d == nil || p.dials != 2 {
		t.Fatalf("warmUp opened %d, want 2", p.dials)
	}
	d.until = time.Now().Add(-time.Millisecond)
	if _, err := tr.DialContext(context.Background(), "tcp", "127.0.0.1:9"); err != nil || p.dials != 3 {
		t.Fatalf("after the window: %v, %d dials; want a new one", err, p.dials)
	}
	for i, s := range p.servers[:2] {
		s.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := s.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Errorf("connection %d opened ahead: read %v, want it closed", i, err)
		}
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestWarmRun runs a replay whose requests are far enough apart that one
// connection would carry them all: the server sees one connection per
// request due in the first second, opened before the first request, and
// every one closed when the run ends.
func TestWarmRun(t *testing.T) {
	handler, err := simHandler(simulator.Handler{}, func(err error) { t.Errorf("simulator: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	states := map[net.Conn]http.ConnState{}
	srv := httptest.NewUnstartedServer(handler)
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		defer mu.Unlock()
		if s == http.StateNew || states[c] != http.StateClosed {
			states[c] = s
		}
	}
	srv.Start()
	defer srv.Close()

	sched := []Planned{{At: 0}, {At: 300 * time.Millisecond}, {At: 600 * time.Millisecond}}
	rep, err := Run(context.Background(), Config{URL: srv.URL + "/v1", Models: []string{"fast"}, MaxTokens: 5, Schedule: sched})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.Succeeded != len(sched) {
		t.Fatalf("%d of %d requests succeeded", rep.Total.Succeeded, len(sched))
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		closed := 0
		for _, s := range states {
			if s == http.StateClosed {
				closed++
			}
		}
		n := len(states)
		mu.Unlock()
		if n != len(sched) {
			t.Fatalf("the server saw %d connections, want %d (one per request due in the first second)", n, len(sched))
		}
		if closed == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d connections closed 5 s after the run", closed, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
