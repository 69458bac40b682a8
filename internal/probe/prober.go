package probe

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// SendFunc sends one probe of t and reads its answer to the end, within
// ctx (which carries t's timeout). It returns nil when the probe
// completed and an error saying why not otherwise.
type SendFunc func(ctx context.Context, t *Target) error

// Options are a Prober's collaborators; the zero value sends probes over
// HTTP with package loadgen's client.
type Options struct {
	// Send sends one probe; nil means HTTP (see NewHTTPSender). Tests
	// replace it.
	Send SendFunc
	// OnChange, if set, is called from the target's goroutine when a
	// target's probes start failing (err is the first failure) or start
	// completing again, and for the first result of each target: enough
	// to log every state change once without logging every probe.
	OnChange func(t *Target, err error)
	// Offset gives the delay of a target's first probe within its
	// interval; nil means uniformly random, so that the targets of one
	// instance, and the instances of a fleet, do not probe in step.
	Offset func(interval time.Duration) time.Duration
	// RootCAs, when not nil, are the authorities the HTTP sender verifies
	// HTTPS targets against instead of the system's (NewHTTPSender).
	RootCAs *x509.CertPool
}

// Prober probes its targets, each on its own schedule, from Start to Stop.
type Prober struct {
	targets []*target
	opts    Options
	// closeIdle closes the HTTP sender's idle connections at Stop, so that
	// no connection goroutine outlives the prober.
	closeIdle func()

	mu      sync.Mutex
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started bool
}

// target is one Target with its request header (the caller's plus the
// probe token) and its counts.
type target struct {
	Target
	counts *Counts
	global *Counts
	// failing is the target's state as OnChange last heard it: nil before
	// the first result.
	failing *bool
}

// New checks the targets, fills in their defaults and returns a Prober
// that has not started. The targets are copied.
func New(targets []Target, opts Options) (*Prober, error) {
	checked, err := check(targets)
	if err != nil {
		return nil, err
	}
	p := &Prober{opts: opts}
	for _, t := range checked {
		t.Header.Set(Header, Token())
		p.targets = append(p.targets, &target{Target: t, counts: new(Counts), global: globalCounts(t.Name)})
	}
	if p.opts.Send == nil {
		s := NewHTTPSender(p.opts.RootCAs)
		p.opts.Send, p.closeIdle = s.Send, s.CloseIdleConnections
	}
	if p.opts.Offset == nil {
		p.opts.Offset = func(d time.Duration) time.Duration { return rand.N(d) }
	}
	return p, nil
}

// Check reports what New would refuse in targets, without making a
// Prober: a caller that must validate its configuration before it can
// know every Option (Caddy provisions an app before the others start)
// makes the Prober once, later.
func Check(targets []Target) error {
	_, err := check(targets)
	return err
}

// check copies targets with their defaults filled in, or says what is
// wrong with each.
func check(targets []Target) ([]Target, error) {
	if len(targets) > MaxTargets {
		return nil, fmt.Errorf("at most %d targets, got %d", MaxTargets, len(targets))
	}
	out := make([]Target, 0, len(targets))
	var errs []error
	names := map[string]bool{}
	for i, t := range targets {
		t.Header = t.Header.Clone()
		if err := t.normalize(); err != nil {
			errs = append(errs, fmt.Errorf("target %d (%q): %w", i, t.Name, err))
			continue
		}
		if names[t.Name] {
			errs = append(errs, fmt.Errorf("target %d: the name %q is taken by an earlier target", i, t.Name))
			continue
		}
		names[t.Name] = true
		if t.Header == nil {
			t.Header = http.Header{}
		}
		out = append(out, t)
	}
	return out, errors.Join(errs...)
}

// Targets returns the targets as probed, defaults filled in. The probe
// header is in their Header.
func (p *Prober) Targets() []Target {
	out := make([]Target, len(p.targets))
	for i, t := range p.targets {
		out[i] = t.Target
	}
	return out
}

// Counts returns the counts of the target named name in this prober (not
// the process-wide ones that expvar serves), and whether it exists.
func (p *Prober) Counts(name string) (CountsSnapshot, bool) {
	for _, t := range p.targets {
		if t.Name == name {
			return t.counts.Snapshot(), true
		}
	}
	return CountsSnapshot{}, false
}

// Start starts one goroutine per target. It does nothing if the prober
// was started before.
func (p *Prober) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return
	}
	p.started = true
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	for _, t := range p.targets {
		p.wg.Go(func() { p.run(ctx, t) })
	}
}

// Stop cancels the probes in flight and waits for every goroutine the
// prober started, so that none outlives a config reload. It is safe to
// call more than once and without Start.
func (p *Prober) Stop() {
	p.mu.Lock()
	// A Start after Stop would leave goroutines no one stops.
	p.started = true
	cancel := p.cancel
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	p.wg.Wait()
	if p.closeIdle != nil {
		p.closeIdle()
	}
}

// run probes t at its interval until ctx ends. The first probe goes out at
// a random offset within the interval and the following ones on a fixed
// grid from it, so probes do not drift later by the time each took. The
// probe is sent on this goroutine: while it runs, no other can start, and
// the ticks it covers are counted as skipped once it returns.
func (p *Prober) run(ctx context.Context, t *target) {
	next := time.Now().Add(p.opts.Offset(t.Interval))
	timer := time.NewTimer(time.Until(next))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		t.add(sent)
		err := p.send(ctx, t)
		if ctx.Err() != nil {
			// Stopped: the probe was cut off by the prober, not failed.
			t.add(canceled)
			return
		}
		if err != nil {
			t.add(failed)
		}
		p.report(t, err)
		next = next.Add(t.Interval)
		if now := time.Now(); now.After(next) {
			// The ticks that fell while the probe ran are not caught up:
			// the next probe is at the first tick from now.
			missed := (now.Sub(next)-1)/t.Interval + 1
			t.addN(skipped, int64(missed))
			next = next.Add(missed * t.Interval)
		}
		timer.Reset(time.Until(next))
	}
}

// send sends one probe under its timeout, turning a panic in the sender
// into a failure: a prober must not take Caddy down.
func (p *Prober) send(ctx context.Context, t *target) (err error) {
	ctx, cancel := context.WithTimeout(ctx, t.Timeout)
	defer cancel()
	defer func() {
		if rec := recover(); rec != nil {
			err = fmt.Errorf("probe sender panicked: %v", rec)
		}
	}()
	return p.opts.Send(ctx, &t.Target)
}

// report tells OnChange about t's first result and every change between
// completing and failing.
func (p *Prober) report(t *target, err error) {
	failing := err != nil
	if t.failing != nil && *t.failing == failing {
		return
	}
	t.failing = &failing
	if p.opts.OnChange != nil {
		p.opts.OnChange(&t.Target, err)
	}
}
