package loadgen

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// An open-loop run promises each request a start time, and a burst at its
// start would otherwise open all its connections at once, inside that
// burst: a dial's connect(2) can hold a scheduler thread for milliseconds
// (one took 3.3 ms on loopback in a traced replay), and the burst's
// other requests queue behind it. So an open-loop run opens, before its
// clock starts, one connection per request due in its first warmWindow,
// and the transport takes those before it dials anew.
const (
	// warmWindow is how far into the run the requests are counted, and how
	// long the opened connections are handed out: one unused after it is
	// closed rather than given to a later request, by when a server may
	// have timed it out.
	warmWindow = time.Second
	// maxWarmConns bounds the connections opened ahead of a run.
	maxWarmConns = 64
	// warmDialTimeout bounds the opening, which delays the run's start.
	warmDialTimeout = 10 * time.Second
)

// warmDialer is a transport's DialContext that hands out connections
// opened ahead to the address they were opened to, then dials as before.
type warmDialer struct {
	dial  func(ctx context.Context, network, addr string) (net.Conn, error)
	addr  string
	until time.Time

	mu    sync.Mutex
	conns []net.Conn
}

// DialContext returns a connection opened ahead when one is left for addr
// within the window, else dials.
func (d *warmDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if c := d.take(network, addr); c != nil {
		return c, nil
	}
	return d.dial(ctx, network, addr)
}

func (d *warmDialer) take(network, addr string) net.Conn {
	if network != "tcp" || addr != d.addr {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.conns) == 0 {
		return nil
	}
	if time.Now().After(d.until) {
		d.closeLocked()
		return nil
	}
	c := d.conns[len(d.conns)-1]
	d.conns = d.conns[:len(d.conns)-1]
	return c
}

// close closes the connections never handed out.
func (d *warmDialer) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closeLocked()
}

func (d *warmDialer) closeLocked() {
	for _, c := range d.conns {
		c.Close()
	}
	d.conns = nil
}

// warmCount is the number of connections an open-loop run opens ahead: one
// per request due within warmWindow of its start, at most Concurrency (no
// more can be in flight) and maxWarmConns.
func warmCount(cfg *Config) int {
	limit := min(cfg.Concurrency, maxWarmConns)
	if cfg.Requests > 0 {
		limit = min(limit, cfg.Warmup+cfg.Requests)
	}
	if len(cfg.Schedule) > 0 {
		limit = min(limit, len(cfg.Schedule))
	}
	// A schedule of its own, so the run's draws are left as they are.
	sched := newSchedule(cfg)
	n := 0
	for n < limit && sched.next() < warmWindow {
		n++
	}
	return n
}

// warmUp opens cfg's connections ahead on t, which must be the run's own
// transport, and returns the dialer to close when the run ends; nil when
// there is nothing to open: a closed-loop run, a proxy between (the
// connections would go to it), or no connection opened. A failed dial is
// left for the requests to meet and report.
func warmUp(ctx context.Context, cfg *Config, t *http.Transport) *warmDialer {
	if cfg.Rate <= 0 && len(cfg.Schedule) == 0 {
		return nil
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Host == "" {
		return nil
	}
	if t.Proxy != nil {
		if p, err := t.Proxy(&http.Request{URL: u}); err != nil || p != nil {
			return nil
		}
	}
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	n := warmCount(cfg)
	if port == "" || n == 0 {
		return nil
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}

	ctx, cancel := context.WithTimeout(ctx, warmDialTimeout)
	defer cancel()
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() { conns[i], _ = dial(ctx, "tcp", addr) })
	}
	wg.Wait()
	d := &warmDialer{dial: dial, addr: addr, until: time.Now().Add(warmWindow)}
	for _, c := range conns {
		if c != nil {
			d.conns = append(d.conns, c)
		}
	}
	if len(d.conns) == 0 {
		return nil
	}
	t.DialContext = d.DialContext
	return d
}
