package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tokentap/tokentap/internal/loadgen"
	"github.com/tokentap/tokentap/internal/simulator"
)

// The public streaming suite (--suite stream) is the stream method of the
// benchmark boards that compare LLM gateways (onthebench,
// GetBusbar/benchmarking, README "What it measures"), run on this
// benchmark's four paths: a mock upstream answers each streamed request
// with a role-only chunk and then suiteFrames content deltas suitePace
// apart, and per path the suite reports, against the direct line,
//   - the added time to the first content frame at one stream (p50, p99);
//   - the added gap between content frames (p50, p99): the path's gap
//     quantile minus the direct line's, both carrying the same pacing and
//     the same timer jitter;
//   - the streams sustained: the highest concurrency of a sweep at which
//     every stream gets every frame, none stalls longer than
//     suiteStallFactor times the pacing, and fewer than 0.1 % fail;
//   - resident memory idle (before any request), steady (under the sweep's
//     steady load) and recovered (after the load);
//   - and the added p99 of a non-streamed request at one at a time.
//
// The board pins the gateway to cores of its own; here the client, the
// mock and the proxy share the machine, so the direct line's own sustained
// concurrency is reported too: a path cannot be judged past it.
const (
	suiteFrames      = 64
	suitePace        = 20 * time.Millisecond
	suiteStallFactor = 10
	// suiteFailShare is the largest share of failed streams a sustained
	// concurrency may have.
	suiteFailShare = 0.001
	// suiteSteadyAt is the sweep's concurrency whose cell the steady
	// memory is sampled in.
	suiteSteadyAt = 64
	// suiteRecovery is how long the proxies rest after the sweep before
	// their recovered memory is read.
	suiteRecovery = 10 * time.Second
)

// suiteSweep are the sweep's concurrencies, up to --suite-max.
var suiteSweep = []int{1, 8, 32, 64, 128, 256, 512}

// suiteReport is the suite's results. Times are in µs unless named ms;
// Added* are the path's quantile minus the direct line's.
type suiteReport struct {
	Frames    int         `json:"frames"`
	PaceMS    float64     `json:"pace_ms"`
	StallMS   float64     `json:"stall_ms"`
	Streams   int         `json:"streams_at_one"`
	Plain     int         `json:"non_streamed_at_one"`
	MaxSweep  int         `json:"sweep_max"`
	Paths     []suitePath `json:"paths"`
	Sweep     []suiteCell `json:"sweep"`
	RecoveryS float64     `json:"recovery_seconds"`
	SteadyAt  int         `json:"steady_concurrency"`
	Notes     []string    `json:"notes,omitempty"`
}

// suitePath is one path's figures.
type suitePath struct {
	Path string `json:"path"`
	// At one stream: time to the first content frame and the gaps
	// between content frames.
	FirstFrameP50us float64  `json:"first_frame_p50_us"`
	FirstFrameP99us float64  `json:"first_frame_p99_us"`
	AddedFirstP50us *float64 `json:"added_first_frame_p50_us,omitempty"`
	AddedFirstP99us *float64 `json:"added_first_frame_p99_us,omitempty"`
	GapP50us        float64  `json:"gap_p50_us"`
	GapP99us        float64  `json:"gap_p99_us"`
	AddedGapP50us   *float64 `json:"added_gap_p50_us,omitempty"`
	AddedGapP99us   *float64 `json:"added_gap_p99_us,omitempty"`
	StreamsFailed   int      `json:"streams_failed"`
	// Sustained is the highest concurrency of the sweep the path
	// sustained (0: not even one), FramesPerSecond the content frames a
	// second it carried there.
	Sustained       int     `json:"sustained"`
	FramesPerSecond float64 `json:"frames_per_second"`
	// Non-streamed, one at a time: the request's time.
	PlainP50us      float64  `json:"non_streamed_p50_us"`
	PlainP99us      float64  `json:"non_streamed_p99_us"`
	AddedPlainP99us *float64 `json:"added_non_streamed_p99_us,omitempty"`
	// Resident memory of the proxy (nil on the direct line).
	IdleMiB      *float64 `json:"idle_rss_mib,omitempty"`
	SteadyMiB    *float64 `json:"steady_rss_mib,omitempty"`
	RecoveredMiB *float64 `json:"recovered_rss_mib,omitempty"`
}

// suiteCell is one path at one concurrency of the sweep.
type suiteCell struct {
	Concurrency     int     `json:"concurrency"`
	Path            string  `json:"path"`
	Streams         int     `json:"streams"`
	Failed          int     `json:"failed"`
	Incomplete      int     `json:"incomplete"`
	Stalled         int     `json:"stalled"`
	MaxGapMS        float64 `json:"max_gap_ms"`
	FramesPerSecond float64 `json:"frames_per_second"`
	Sustained       bool    `json:"sustained"`
}

// suiteSamples are one path's raw measurements.
type suiteSamples struct {
	first, gaps, plain []int64 // ns
	failed             int
	idle, steady, rec  []int64 // RSS bytes
}

// runSuite runs the public streaming suite on b's paths.
func (b *bench) runSuite(ctx context.Context) (*suiteReport, error) {
	o := b.o
	rep := &suiteReport{
		Frames: suiteFrames, PaceMS: ms(suitePace), StallMS: ms(suiteStallFactor * suitePace),
		Streams: o.suiteStreams, Plain: o.suitePlain, MaxSweep: o.suiteMax,
		RecoveryS: suiteRecovery.Seconds(), SteadyAt: suiteSteadyAt,
	}
	var s [numPaths]suiteSamples
	// Idle first, on processes that have served nothing.
	for pi, p := range b.paths {
		if p.proc == nil {
			continue
		}
		v, err := sampleRSS(ctx, p.proc.pid(), 5)
		if err != nil {
			return rep, err
		}
		s[pi].idle = v
	}
	for _, p := range b.paths {
		if err := b.warmUp(ctx, p, 1); err != nil {
			return rep, err
		}
	}

	fmt.Fprintf(b.log, "suite: %d streams of %d frames %v apart per path, one at a time, in %d rounds\n",
		o.suiteStreams, suiteFrames, suitePace, o.rounds)
	perCell := max(1, o.suiteStreams/o.rounds)
	for r := range o.rounds {
		for _, pi := range roundOrder(r) {
			if err := b.suiteStreamsAtOne(ctx, pi, perCell, &s[pi]); err != nil {
				return rep, err
			}
		}
	}

	fmt.Fprintf(b.log, "suite: %d non-streamed requests per path, one at a time\n", o.suitePlain)
	perPlain := max(1, o.suitePlain/o.rounds)
	for r := range o.rounds {
		for _, pi := range roundOrder(r) {
			if err := b.suitePlainAtOne(ctx, pi, perPlain, &s[pi]); err != nil {
				return rep, err
			}
		}
	}

	sustained := [numPaths]int{}
	frames := [numPaths]float64{}
	failedAt := [numPaths]bool{}
	for ci, c := range suiteSweep {
		if c > o.suiteMax {
			break
		}
		fmt.Fprintf(b.log, "suite: %d streams at once per path\n", c)
		for _, pi := range roundOrder(ci) {
			if failedAt[pi] {
				continue
			}
			cell, steady, err := b.suiteSweepCell(ctx, pi, c)
			if err != nil {
				return rep, err
			}
			if c == suiteSteadyAt {
				s[pi].steady = steady
			}
			rep.Sweep = append(rep.Sweep, cell)
			if cell.Sustained {
				sustained[pi], frames[pi] = c, cell.FramesPerSecond
			} else {
				failedAt[pi] = true
			}
		}
	}
	select {
	case <-ctx.Done():
		return rep, ctx.Err()
	case <-time.After(suiteRecovery):
	}
	for pi, p := range b.paths {
		if p.proc == nil {
			continue
		}
		v, err := sampleRSS(ctx, p.proc.pid(), 5)
		if err != nil {
			return rep, err
		}
		s[pi].rec = v
	}

	for pi, p := range b.paths {
		rep.Paths = append(rep.Paths, s[pi].path(p.name, &s[pathDirect], sustained[pi], frames[pi]))
	}
	if top := sweepTop(o.suiteMax); sustained[pathDirect] < top {
		rep.Notes = append(rep.Notes, fmt.Sprintf("the direct line itself sustained %d streams of the sweep's %d: past that the machine (client, mock and proxies on %d CPUs), not the proxies, sets the limit", sustained[pathDirect], top, runtime.NumCPU()))
	}
	return rep, nil
}

// sweepTop is the sweep's highest concurrency within max.
func sweepTop(max int) int {
	top := 0
	for _, c := range suiteSweep {
		if c <= max {
			top = c
		}
	}
	return top
}

// suiteHeader is the mock's schedule: the role chunk at once, the first
// content delta one pace later, then one a pace apart.
func suiteHeader() http.Header {
	return simHeader(suitePace, float64(time.Second/suitePace), suiteFrames)
}

// suiteStreamsAtOne sends n streams through path pi one after another.
func (b *bench) suiteStreamsAtOne(ctx context.Context, pi, n int, s *suiteSamples) error {
	p := b.paths[pi]
	_, err := loadgen.Run(ctx, loadgen.Config{
		URL: p.url + "/v1", Models: []string{"suite"}, Concurrency: 1, Requests: n,
		Timeout: requestTimeout, Client: p.client, Header: suiteHeader(),
		OnResult: func(r *loadgen.Result) {
			b.mu.Lock()
			defer b.mu.Unlock()
			if !r.OK() || r.ContentEvents != suiteFrames {
				s.failed++
				return
			}
			s.first = append(s.first, int64(r.FirstToken))
			for _, g := range r.Gaps {
				s.gaps = append(s.gaps, int64(g))
			}
		},
	})
	return err
}

// suitePlainAtOne sends n non-streamed requests through path pi one after
// another, each timed from its sending to the end of its body.
func (b *bench) suitePlainAtOne(ctx context.Context, pi, n int, s *suiteSamples) error {
	p := b.paths[pi]
	body := []byte(`{"model":"suite","stream":false,"messages":[{"role":"user","content":"benchmark"}]}`)
	h := simHeader(0, 1e5, 16)
	// Stamps date the writes of a stream; a body is one write.
	h.Del(simulator.HeaderStamp)
	for range n {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/v1/chat/completions", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header = h.Clone()
		req.Header.Set("Content-Type", "application/json")
		t0 := time.Now()
		resp, err := p.client.Do(req)
		if err != nil {
			return fmt.Errorf("%s: non-streamed request: %w", p.name, err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took := time.Since(t0)
		if err != nil || resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: non-streamed request: status %d, %v", p.name, resp.StatusCode, err)
		}
		b.mu.Lock()
		s.plain = append(s.plain, int64(took))
		b.mu.Unlock()
	}
	return nil
}

// suiteSweepCell opens c streams through path pi at once and judges
// whether the path sustained them; it samples the proxy's memory while
// they run.
func (b *bench) suiteSweepCell(ctx context.Context, pi, c int) (suiteCell, []int64, error) {
	p := b.paths[pi]
	cell := suiteCell{Concurrency: c, Path: p.name}
	if err := b.warmUp(ctx, p, c); err != nil {
		return cell, nil, err
	}
	stall := suiteStallFactor * suitePace
	var mu sync.Mutex
	var maxGap time.Duration
	var contentFrames int64
	var rss []int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	if p.proc != nil {
		wg.Go(func() {
			t := time.NewTicker(memSample)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					if v, err := rssBytes(p.proc.pid()); err == nil {
						mu.Lock()
						rss = append(rss, v)
						mu.Unlock()
					}
				}
			}
		})
	}
	started := time.Now()
	_, err := loadgen.Run(ctx, loadgen.Config{
		URL: p.url + "/v1", Models: []string{"suite"}, Concurrency: c, Requests: c,
		Timeout: requestTimeout, Client: p.client, Header: suiteHeader(),
		OnResult: func(r *loadgen.Result) {
			mu.Lock()
			defer mu.Unlock()
			cell.Streams++
			contentFrames += int64(r.ContentEvents)
			switch {
			case !r.OK():
				cell.Failed++
				return
			case r.ContentEvents != suiteFrames:
				cell.Incomplete++
			}
			worst := r.FirstToken - suitePace // the first frame's wait past the role chunk's pacing
			for _, g := range r.Gaps {
				worst = max(worst, g)
			}
			maxGap = max(maxGap, worst)
			if worst > stall {
				cell.Stalled++
			}
		},
	})
	wall := time.Since(started)
	close(done)
	wg.Wait()
	if err != nil {
		return cell, nil, err
	}
	cell.MaxGapMS = ms(maxGap)
	cell.FramesPerSecond = float64(contentFrames) / wall.Seconds()
	cell.Sustained = cell.sustained()
	// The steady level: the later half of the samples, once the streams
	// are all open.
	return cell, rss[len(rss)/2:], nil
}

// sustained reports whether the cell's path sustained its streams: every
// stream answered, every one that completed got every frame and stalled
// nowhere, and at most suiteFailShare of them failed.
func (c *suiteCell) sustained() bool {
	return c.Streams == c.Concurrency && c.Incomplete == 0 && c.Stalled == 0 &&
		float64(c.Failed) <= suiteFailShare*float64(c.Concurrency)
}

// sampleRSS reads a process's resident memory n times, memSample apart.
func sampleRSS(ctx context.Context, pid, n int) ([]int64, error) {
	var out []int64
	for range n {
		v, err := rssBytes(pid)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(memSample):
		}
	}
	return out, nil
}

// path turns a path's samples into its row, against the direct line's.
func (s *suiteSamples) path(name string, direct *suiteSamples, sustained int, frames float64) suitePath {
	q := func(v []int64, p float64) float64 {
		c := slices.Clone(v)
		slices.Sort(c)
		return float64(quantile(c, p)) / 1e3
	}
	row := suitePath{
		Path:            name,
		FirstFrameP50us: q(s.first, 0.5), FirstFrameP99us: q(s.first, 0.99),
		GapP50us: q(s.gaps, 0.5), GapP99us: q(s.gaps, 0.99),
		PlainP50us: q(s.plain, 0.5), PlainP99us: q(s.plain, 0.99),
		StreamsFailed: s.failed, Sustained: sustained, FramesPerSecond: frames,
	}
	if s != direct {
		row.AddedFirstP50us = ptr(row.FirstFrameP50us - q(direct.first, 0.5))
		row.AddedFirstP99us = ptr(row.FirstFrameP99us - q(direct.first, 0.99))
		row.AddedGapP50us = ptr(row.GapP50us - q(direct.gaps, 0.5))
		row.AddedGapP99us = ptr(row.GapP99us - q(direct.gaps, 0.99))
		row.AddedPlainP99us = ptr(row.PlainP99us - q(direct.plain, 0.99))
	}
	mib := func(v []int64) *float64 {
		if len(v) == 0 {
			return nil
		}
		return ptr(float64(median(v)) / (1 << 20))
	}
	row.IdleMiB, row.SteadyMiB, row.RecoveredMiB = mib(s.idle), mib(s.steady), mib(s.rec)
	return row
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// writeMarkdown prints the suite's figures.
func (r *suiteReport) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "## The public streaming suite\n\n")
	r.writeTables(w)
}

// writeSuiteResults prints a suite run as docs/BENCHMARKS.md shows it:
// the run's machine and command, then the tables (TestBenchmarksSuiteDoc).
func (rep *report) writeSuiteResults(w io.Writer) {
	m := rep.Machine
	fmt.Fprintf(w, "Run %s at commit %s. Machine: %s, %d CPUs, %.0f GiB, Linux %s, %s. Load average (1 min): %.2f at the start (5 min %.2f, 15 min %.2f), %.2f at the end. Run time %.0f s.\n\n",
		rep.Started.UTC().Format("2006-01-02 15:04 MST"), rep.Commit, m.CPU, m.CPUs, m.MemoryGiB, m.Kernel, m.Go,
		rep.LoadAverage.Start, rep.LoadAverage.Start5, rep.LoadAverage.Start15, rep.LoadAverage.End, rep.Seconds)
	fmt.Fprintf(w, "Command: `%s`.\n\n", rep.Command)
	rep.Suite.writeTables(w)
}

// writeTables prints the per-path figures and the sweep.
func (r *suiteReport) writeTables(w io.Writer) {
	fmt.Fprintf(w, "A role chunk, then %d content frames %g ms apart; a stall is a gap over %g ms. %d streams per path one at a time, %d non-streamed requests per path one at a time, the sweep up to %d streams at once. Added: the path's quantile minus the direct line's, in µs.\n\n",
		r.Frames, r.PaceMS, r.StallMS, r.Streams, r.Plain, r.MaxSweep)
	fmt.Fprintln(w, "| path | added first frame p50 | p99 | added gap p50 | p99 | streams sustained | frames/s there | added non-streamed p99 | RSS idle MiB | steady | recovered |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	f := func(v *float64) string {
		if v == nil {
			return "–"
		}
		return fmt.Sprintf("%+.0f", *v)
	}
	m := func(v *float64) string {
		if v == nil {
			return "–"
		}
		return fmt.Sprintf("%.1f", *v)
	}
	for _, p := range r.Paths {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %d | %.0f | %s | %s | %s | %s |\n", cell(p.Path),
			f(p.AddedFirstP50us), f(p.AddedFirstP99us), f(p.AddedGapP50us), f(p.AddedGapP99us),
			p.Sustained, p.FramesPerSecond, f(p.AddedPlainP99us), m(p.IdleMiB), m(p.SteadyMiB), m(p.RecoveredMiB))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "The sweep, path by path (a path leaves it at the first step it does not sustain):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| streams | path | failed | missing frames | stalled | longest wait ms | frames/s | sustained |")
	fmt.Fprintln(w, "| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, c := range r.Sweep {
		yes := "no"
		if c.Sustained {
			yes = "yes"
		}
		fmt.Fprintf(w, "| %d | %s | %d | %d | %d | %.1f | %.0f | %s |\n", c.Concurrency, cell(c.Path), c.Failed, c.Incomplete, c.Stalled, c.MaxGapMS, c.FramesPerSecond, yes)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintf(w, "\n%s\n", strings.Join(r.Notes, "\n"))
	}
}

var errSuiteOnly = errors.New("--suite runs only the suite: leave out --runs, --compare and --profile")
