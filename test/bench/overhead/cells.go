package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/tokentap/tokentap/internal/loadgen"
	"github.com/tokentap/tokentap/internal/simulator"
)

// requestTimeout bounds one benchmark request: the longest stream of the
// default levels lasts about a second.
const requestTimeout = time.Minute

// simHeader is the simulator's schedule for one request, and the stamps
// that date every write.
func simHeader(ttft time.Duration, rate float64, tokens int) http.Header {
	h := http.Header{}
	h.Set(simulator.HeaderStamp, "true")
	h.Set(simulator.HeaderTimeToFirstToken, ttft.String())
	h.Set(simulator.HeaderTokensPerSecond, strconv.FormatFloat(rate, 'f', -1, 64))
	h.Set(simulator.HeaderOutputTokens, strconv.Itoa(tokens))
	return h
}

// roundOrders are the orders of the paths in four rounds: a Williams
// square, in which every path takes every position once and follows every
// other path once, so that neither a position in the round nor the path
// before it favours one path over four rounds. A B C D then D C B A alone
// would balance Caddy and tokentap but not the A/A control, always first
// or last, a position that biases its CPU below Caddy's over a series of
// runs. The first two rows are that alternation, so that two rounds
// (--short) still give Caddy, tokentap and the fourth path the same mean
// position.
var roundOrders = [4][numPaths]int{
	{pathDirect, pathCaddy, pathTokentap, pathControl},
	{pathControl, pathTokentap, pathCaddy, pathDirect},
	{pathTokentap, pathDirect, pathControl, pathCaddy},
	{pathCaddy, pathControl, pathDirect, pathTokentap},
}

// roundOrder is the order of the paths in round r.
func roundOrder(r int) []int {
	o := roundOrders[r%len(roundOrders)]
	return o[:]
}

// drainAfterRounds is how long a level waits after its last cell before
// it reads the proxies' CPU: longer than the batch span processor's
// default schedule (5 s), so that the last cells' spans are exported
// inside the measurement.
const drainAfterRounds = 6 * time.Second

// level measures every path at one concurrency: a warm-up that opens the
// connections, then the rounds.
//
// A proxy's CPU is counted from the first cell to the end of the drain
// after the last, not only inside its own cells: tokentap exports the
// spans of one cell while other paths are loaded (the span processor's
// timer), and a collection started in a cell runs on after it, and that
// work is the load's too. Outside their cells, unloaded, the proxies use
// next to none (docs/BENCHMARKS.md has the figures).
func (b *bench) level(ctx context.Context, li int, lv level) error {
	fmt.Fprintf(b.log, "concurrency %d: %d-token streams at %g tokens/s, %d rounds of %v per path\n",
		lv.Concurrency, lv.Tokens, lv.TokensPerSecond, b.o.rounds, b.o.cell)
	for _, p := range roundOrder(0) {
		if err := b.warmUp(ctx, b.paths[p], lv.Concurrency); err != nil {
			return err
		}
	}
	start, err := b.proxyTicks()
	if err != nil {
		return err
	}
	for r := range b.o.rounds {
		for _, p := range roundOrder(r) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err := b.cell(ctx, li, lv, r, p); err != nil {
				return err
			}
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(drainAfterRounds):
	}
	end, err := b.proxyTicks()
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for pi := range numPaths {
		if b.paths[pi].proc != nil {
			b.samples[li][pi].cpuTicks = end[pi] - start[pi]
		}
	}
	return nil
}

// proxyTicks reads every proxy's CPU ticks (the direct path has none).
func (b *bench) proxyTicks() ([numPaths]int64, error) {
	var t [numPaths]int64
	for pi, p := range b.paths {
		if p.proc == nil {
			continue
		}
		var err error
		if t[pi], err = cpuTicks(p.proc.pid()); err != nil {
			return t, err
		}
	}
	return t, nil
}

// warmUp sends one short request per client, all at once, so that the
// client's pool and the proxy's upstream pool hold as many connections as
// the level needs before anything is measured.
func (b *bench) warmUp(ctx context.Context, p *path, concurrency int) error {
	rep, err := loadgen.Run(ctx, loadgen.Config{
		URL: p.url + "/v1", Models: []string{"warm-up"}, Concurrency: concurrency, Requests: concurrency,
		Timeout: requestTimeout, Client: p.client,
		Header: simHeader(0, 1000, 2),
	})
	if err != nil {
		return err
	}
	if rep.Total.Failed > 0 {
		return fmt.Errorf("warming up %s: %d of %d requests failed: %v", p.name, rep.Total.Failed, rep.Total.Requests, rep.Total.Errors)
	}
	return nil
}

// cell loads one path for the cell duration and pools what it measured.
func (b *bench) cell(ctx context.Context, li int, lv level, round, pi int) error {
	p := b.paths[pi]
	s := b.samples[li][pi]
	b.mu.Lock()
	b.loads = append(b.loads, loadAverage())
	b.mu.Unlock()

	var before int64
	if p.proc != nil {
		var err error
		if before, err = cpuTicks(p.proc.pid()); err != nil {
			return err
		}
	}
	b.mu.Lock()
	eventsBefore := s.events
	b.mu.Unlock()
	started := time.Now()
	_, err := loadgen.Run(ctx, loadgen.Config{
		URL: p.url + "/v1", Models: []string{"bench"}, Concurrency: lv.Concurrency, Duration: b.o.cell,
		Timeout: requestTimeout, Client: p.client,
		Header: simHeader(b.o.ttft, lv.TokensPerSecond, lv.Tokens),
		// A unique body per request gives each response a unique id,
		// by which tokentap's span is matched with the client's view.
		Prompt: func(seq int) string {
			return fmt.Sprintf("overhead benchmark, path %s, concurrency %d, round %d, request %d", p.key, lv.Concurrency, round, seq)
		},
		OnResult: func(r *loadgen.Result) { b.collect(li, pi, r) },
	})
	if err != nil {
		return err
	}
	wall := time.Since(started)
	if p.proc != nil {
		after, err := cpuTicks(p.proc.pid())
		if err != nil {
			return err
		}
		b.mu.Lock()
		s.cellTicks += after - before
		s.cells = append(s.cells, cellCPU{Round: round, Ticks: after - before, Events: s.events - eventsBefore})
		b.mu.Unlock()
	}
	b.mu.Lock()
	s.wall += wall
	b.mu.Unlock()
	return nil
}

// collect pools one request's measurements.
func (b *bench) collect(li, pi int, r *loadgen.Result) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.samples[li][pi]
	s.requests++
	s.events += int64(r.Events)
	if !r.OK() {
		s.failed++
		s.errors[r.ErrorKind]++
		return
	}
	s.ttft = append(s.ttft, int64(r.TimeToFirstToken()))
	for _, d := range r.Delays {
		s.delays = append(s.delays, int64(d))
	}
	if pi == pathTokentap && r.ResponseID != "" {
		b.byID[r.ResponseID] = clientView{level: li, ttft: r.TimeToFirstToken(), rate: r.OutputTokensPerSecond()}
	}
}

// The memory measurement's streams: slow enough that all are open at
// once for a few seconds, even when opening them takes a busy machine a
// second.
const (
	memTTFT   = time.Second
	memRate   = 2.0
	memTokens = 8 // the last one 3.5 s after the first
	memSample = 50 * time.Millisecond
)

// memory measures each proxy's resident memory per open stream: its RSS
// with N streams open through it minus its RSS before, over N. It runs on
// fresh processes, before the rounds, so that no earlier load has grown the
// heap that the streams would then fill unseen.
func (b *bench) memory(ctx context.Context) (memoryReport, error) {
	out := memoryReport{Streams: b.o.rssStreams}
	var errs []error
	for _, pi := range []int{pathCaddy, pathTokentap, pathControl} {
		p := b.paths[pi]
		if err := b.warmUp(ctx, p, 4); err != nil {
			return out, err
		}
		row, err := b.memoryOf(ctx, p)
		row.Path = p.name
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.name, err))
			row.Note = err.Error()
		}
		out.Rows = append(out.Rows, row)
	}
	return out, errors.Join(errs...)
}

type rssSample struct {
	at  time.Time
	rss int64
}

func (b *bench) memoryOf(ctx context.Context, p *path) (memoryRow, error) {
	pid := p.proc.pid()
	var row memoryRow
	var idle []int64
	for range 5 {
		v, err := rssBytes(pid)
		if err != nil {
			return row, err
		}
		idle = append(idle, v)
		time.Sleep(memSample)
	}
	row.IdleKiB = float64(median(idle)) / 1024

	done := make(chan struct{})
	var samples []rssSample
	var sampleErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(memSample)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				v, err := rssBytes(pid)
				if err != nil {
					sampleErr = err
					return
				}
				samples = append(samples, rssSample{now, v})
			}
		}
	})
	var mu sync.Mutex
	var results []*loadgen.Result
	n := b.o.rssStreams
	rep, err := loadgen.Run(ctx, loadgen.Config{
		URL: p.url + "/v1", Models: []string{"memory"}, Concurrency: n, Requests: n,
		Timeout: requestTimeout, Client: p.client,
		Header: simHeader(memTTFT, memRate, memTokens),
		OnResult: func(r *loadgen.Result) {
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
		},
	})
	close(done)
	wg.Wait()
	if err != nil {
		return row, err
	}
	if sampleErr != nil {
		return row, sampleErr
	}
	if rep.Total.Failed > 0 {
		return row, fmt.Errorf("%d of %d streams failed: %v", rep.Total.Failed, n, rep.Total.Errors)
	}
	open := allOpen(results, samples)
	if len(open) == 0 {
		return row, fmt.Errorf("no moment with all %d streams open at once (the machine took too long to open them)", n)
	}
	row.Samples = len(open)
	row.OpenKiB = float64(median(open)) / 1024
	row.PerStreamKiB = (row.OpenKiB - row.IdleKiB) / float64(n)
	return row, nil
}

// allOpen returns the RSS samples taken while every stream was between
// its first and its last token: open at both ends, data flowing.
func allOpen(results []*loadgen.Result, samples []rssSample) []int64 {
	var from, to time.Time
	for i, r := range results {
		first, last := r.Start.Add(r.FirstToken), r.Start.Add(r.LastToken)
		if i == 0 || first.After(from) {
			from = first
		}
		if i == 0 || last.Before(to) {
			to = last
		}
	}
	var out []int64
	for _, s := range samples {
		if !s.at.Before(from) && !s.at.After(to) {
			out = append(out, s.rss)
		}
	}
	return out
}

// takeProfile loads the tokentap path at one level while its admin API
// takes a CPU profile, and then, with --profile-baseline, the plain Caddy
// path the same way. It runs after the measured rounds, because profiling
// slows the profiled process. The simulator paces every stream, so both
// profiles cover about the same number of events and diff directly.
func (b *bench) takeProfile(ctx context.Context) error {
	var lv level
	for _, l := range b.o.levels {
		if l.Concurrency == b.o.profileAt {
			lv = l
		}
	}
	if err := b.profilePath(ctx, pathTokentap, lv, b.o.profile); err != nil || b.o.profileBase == "" {
		return err
	}
	return b.profilePath(ctx, pathCaddy, lv, b.o.profileBase)
}

func (b *bench) profilePath(ctx context.Context, pi int, lv level, file string) error {
	p := b.paths[pi]
	fmt.Fprintf(b.log, "profiling %s at concurrency %d for %v into %s\n", p.name, lv.Concurrency, b.o.profileFor, file)
	if err := b.warmUp(ctx, p, lv.Concurrency); err != nil {
		return err
	}
	adminURL := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", b.o.adminBase+pi, int(b.o.profileFor.Seconds()))
	profiled := make(chan error, 1)
	go func() { profiled <- fetchTo(ctx, adminURL, file) }()
	res, err := loadgen.Run(ctx, loadgen.Config{
		URL: p.url + "/v1", Models: []string{"profile"}, Concurrency: lv.Concurrency,
		Duration: b.o.profileFor + time.Second, Timeout: requestTimeout, Client: p.client,
		Header: simHeader(b.o.ttft, lv.TokensPerSecond, lv.Tokens),
	})
	if err == nil {
		fmt.Fprintf(b.log, "profiled %s: %d requests, %d succeeded\n", p.name, res.Total.Requests, res.Total.Succeeded)
	}
	return errors.Join(err, <-profiled)
}

// fetchTo saves the body of a GET to a file.
func fetchTo(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 1024))
		return fmt.Errorf("%s: %s: %s", url, res.Status, msg)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
