package loadgen

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// lateStart is how far behind its schedule a rate-mode request may start
// before it is counted late: timer wake-ups on a busy machine take about a
// millisecond.
const lateStart = 10 * time.Millisecond

// Run sends the configured load and reports what the client measured. It
// returns an error only for an invalid Config; failed requests are counted
// in the report. When ctx ends, no request is started any more and those in
// flight are canceled (and counted as such).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	client := cfg.Client
	var transport *http.Transport
	if client == nil {
		client = newClient(cfg.Concurrency)
		transport = client.Transport.(*http.Transport)
		defer client.CloseIdleConnections()
	}
	agg := newAggregator(&cfg)
	finish := func(r *Result) {
		r.Warmup = r.Seq < cfg.Warmup
		if cfg.OnResult != nil {
			cfg.OnResult(r)
		}
		if !r.Warmup {
			agg.add(r)
		}
	}

	// A replay's requests are made ahead of their time, so that a burst
	// of long prompts starts when recorded, not when built.
	var ahead <-chan []byte
	if len(cfg.Schedule) > 0 {
		stop := make(chan struct{})
		defer close(stop)
		ahead = bodies(&cfg, stop)
	}

	if cfg.counter != nil {
		// The vocabulary loads before the clock starts, not under the
		// first requests.
		if err := cfg.counter.Load(); err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
	}
	if transport != nil {
		if warm := warmUp(ctx, &cfg, transport); warm != nil {
			defer warm.close()
		}
	}
	// The clock starts on a collected heap: a collection that the bodies
	// made above would otherwise trigger lands on the first burst, and
	// with two cores its mark phase holds one of them, so that burst's
	// requests start milliseconds late (docs/load-testing.md,
	// "Replaying").
	runtime.GC()
	cpu0, cpuOK := processCPU()
	start := time.Now()
	var deadline time.Time
	if cfg.Duration > 0 {
		deadline = start.Add(cfg.Duration)
	}
	// more reports whether request seq may start: within both bounds and
	// before the run was stopped.
	more := func(seq int) bool {
		if cfg.Requests > 0 && seq >= cfg.Warmup+cfg.Requests {
			return false
		}
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return false
		}
		return ctx.Err() == nil
	}

	var late int
	if cfg.Rate > 0 || len(cfg.Schedule) > 0 {
		late = openLoop(ctx, &cfg, client, start, ahead, more, finish)
	} else {
		closedLoop(ctx, &cfg, client, more, finish)
	}
	rep := agg.report(start, time.Now(), late)
	if cpu1, ok := processCPU(); ok && cpuOK {
		rep.setClientCPU(cpu1-cpu0, time.Since(start))
	}
	return rep, nil
}

// closedLoop runs cfg.Concurrency clients, each sending its next request
// as soon as its last one ended.
func closedLoop(ctx context.Context, cfg *Config, client *http.Client, more func(int) bool, finish func(*Result)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Go(func() {
			for {
				seq := int(next.Add(1) - 1)
				if !more(seq) {
					return
				}
				finish(do(ctx, cfg, client, seq, nil))
			}
		})
	}
	wg.Wait()
}

// openLoop starts each request when its schedule says (newSchedule),
// whatever became of the earlier ones, with at most cfg.Concurrency in
// flight; a request that must wait for a slot starts late, and the number
// of those that started more than lateStart behind schedule is returned.
//
// ahead, if not nil, gives each request's body in turn, made before it is
// due (bodies).
func openLoop(ctx context.Context, cfg *Config, client *http.Client, start time.Time, ahead <-chan []byte, more func(int) bool, finish func(*Result)) int {
	slots := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	late := 0
	sched := newSchedule(cfg)
	for seq := 0; ; seq++ {
		due := start.Add(sched.next())
		if !more(seq) {
			// Done by count (a replay's schedule ends here) or time,
			// without waiting for a request that will not be sent.
			return late
		}
		var body []byte
		if ahead != nil {
			select {
			case body = <-ahead:
			case <-ctx.Done():
				return late
			}
		}
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return late
			}
		}
		if !more(seq) {
			return late
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return late
		}
		if time.Since(due) > lateStart && seq >= cfg.Warmup {
			late++
		}
		wg.Go(func() {
			defer func() { <-slots }()
			finish(do(ctx, cfg, client, seq, body))
		})
	}
}

// newClient is the default client: one idle connection kept per possible
// concurrent request, so that a steady run opens each connection once, and
// no compression, so that events are timed as they arrive.
func newClient(concurrency int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = concurrency
	t.IdleConnTimeout = 5 * time.Minute
	t.DisableCompression = true
	return &http.Client{Transport: t}
}

// bodiesAhead is how many request bodies bodies keeps made ahead: a
// recorded burst larger than that starts as fast as they are made.
const bodiesAhead = 256

// bodies makes cfg's request bodies in order, ahead of their use, until
// stop is closed; the channel holds bodiesAhead of them, and the first
// ones (as many as it holds) are made before it is returned, so that a
// run starting with a burst starts it on time.
func bodies(cfg *Config, stop <-chan struct{}) <-chan []byte {
	n := cfg.Requests
	ch := make(chan []byte, min(n, bodiesAhead))
	primed := make(chan struct{})
	go func() {
		defer func() {
			select {
			case <-primed:
			default:
				close(primed)
			}
		}()
		for seq := range n {
			select {
			case ch <- cfg.body(seq):
			case <-stop:
				return
			}
			if len(ch) == cap(ch) {
				select {
				case <-primed:
				default:
					close(primed)
				}
			}
		}
	}()
	<-primed
	return ch
}
