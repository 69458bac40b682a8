package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// The overhead targets (docs/BENCHMARKS.md, "What the targets ask").
const (
	targetLevel          = 64   // the concurrency the delay and CPU targets apply at
	targetAddedP50       = 20.0 // µs of added per-event delay at the median
	targetCPURatio       = 1.10 // tokentap's CPU per event over plain Caddy's
	targetMemoryKiB      = 16.0 // KiB per open stream above plain Caddy
	targetTTFTAccuracyMS = 1.0  // ms between tokentap's and the client's TTFT, at the median
	targetRateAccuracy   = 2.0  // % between tokentap's and the client's tokens/s, at the median
)

// report is a run's figures, with what is needed to reproduce and judge
// them: the machine, the command, the settings and the load average.
type report struct {
	Started time.Time `json:"started"`
	Seconds float64   `json:"seconds"`
	Machine machine   `json:"machine"`
	// Commit is the checkout's HEAD when the run started, and Dirty
	// whether the checkout had changes then: the build measured is the
	// one --binary names, which the results file can only trust to be
	// this commit's when the tree was clean.
	Commit      string        `json:"commit,omitempty"`
	Dirty       bool          `json:"dirty,omitempty"`
	Command     string        `json:"command"`
	Settings    settings      `json:"settings"`
	LoadAverage loadRange     `json:"load_average"`
	Levels      []levelReport `json:"levels"`
	Memory      memoryReport  `json:"memory"`
	Accuracy    []accuracyRow `json:"accuracy"`
	Targets     []target      `json:"targets"`
	// Suite is the public streaming suite's figures, for a --suite run
	// (which measures no levels).
	Suite *suiteReport `json:"suite,omitempty"`
	// Notes say what could not be measured, and why.
	Notes []string `json:"notes,omitempty"`
}

type machine struct {
	CPU       string  `json:"cpu"`
	CPUs      int     `json:"cpus"`
	MemoryGiB float64 `json:"memory_gib"`
	Kernel    string  `json:"kernel"`
	Go        string  `json:"go"`
	Binary    string  `json:"binary"`
}

type settings struct {
	Levels      []level `json:"levels"`
	Rounds      int     `json:"rounds"`
	CellSeconds float64 `json:"cell_seconds"`
	TTFTMillis  float64 `json:"simulator_ttft_ms"`
	RSSStreams  int     `json:"rss_streams"`
	Short       bool    `json:"short"`
}

// loadRange is the 1-minute load average at the start and end of the run
// and its range over the measured cells, with the 5- and 15-minute
// averages at the start, which say how busy the machine was before.
type loadRange struct {
	Start   float64 `json:"start"`
	Start5  float64 `json:"start_5min"`
	Start15 float64 `json:"start_15min"`
	End     float64 `json:"end"`
	Min     float64 `json:"cells_min"`
	Max     float64 `json:"cells_max"`
}

type levelReport struct {
	level
	Paths []pathRow `json:"paths"`
}

// pathRow is one path at one level. Delays are in µs, times to first token
// in ms; Added* are the path's quantile minus plain Caddy's (nil for Caddy
// itself), so the A/A control's is the noise floor.
type pathRow struct {
	Path       string         `json:"path"`
	Requests   int            `json:"requests"`
	Failed     int            `json:"failed"`
	Errors     map[string]int `json:"errors,omitempty"`
	Events     int64          `json:"events"`
	TTFTP50ms  float64        `json:"ttft_p50_ms"`
	TTFTP99ms  float64        `json:"ttft_p99_ms"`
	DelayP50us float64        `json:"delay_p50_us"`
	DelayP99us float64        `json:"delay_p99_us"`
	AddedP50us *float64       `json:"added_p50_us,omitempty"`
	AddedP99us *float64       `json:"added_p99_us,omitempty"`
	// CPU is the proxy process's over the level, from its first cell to
	// the drain after the last (bench.level); nil on the direct path,
	// which has no proxy. CPUOutsideCells is the share of it used while
	// other paths were loaded or in the drain: deferred work such as span
	// export, and a collection running on past a cell.
	CPUSeconds          *float64 `json:"cpu_seconds,omitempty"`
	CPUPerMillionEvents *float64 `json:"cpu_seconds_per_million_events,omitempty"`
	CPUVsCaddy          *float64 `json:"cpu_vs_caddy,omitempty"`
	CPUOutsideCells     *float64 `json:"cpu_outside_cells_share,omitempty"`
	// Cells are the proxy's own cells, for the spread within a run
	// (in the JSON report only).
	Cells []cellCPU `json:"cells,omitempty"`
}

type memoryReport struct {
	Streams int         `json:"streams"`
	Rows    []memoryRow `json:"rows"`
}

type memoryRow struct {
	Path         string   `json:"path"`
	IdleKiB      float64  `json:"idle_rss_kib"`
	OpenKiB      float64  `json:"open_rss_kib"`
	PerStreamKiB float64  `json:"per_stream_kib"`
	VsCaddyKiB   *float64 `json:"per_stream_vs_caddy_kib,omitempty"`
	Samples      int      `json:"samples"`
	Note         string   `json:"note,omitempty"`
}

// accuracyRow compares, request by request, tokentap's span with what the
// client measured: TTFT differences are client minus tokentap (the client
// also counts the request's way to the proxy and the event's way back), rate
// differences tokentap's relative to the client's.
type accuracyRow struct {
	Concurrency        int     `json:"concurrency"`
	Matched            int     `json:"matched"`
	Unmatched          int     `json:"unmatched"`
	ClientTTFTP50ms    float64 `json:"client_ttft_p50_ms"`
	TokentapTTFTP50ms  float64 `json:"tokentap_ttft_p50_ms"`
	TTFTDiffP50ms      float64 `json:"ttft_diff_p50_ms"`
	TTFTDiffP99ms      float64 `json:"ttft_diff_p99_ms"`
	RateDiffP50pct     float64 `json:"rate_diff_p50_pct"`
	RateAbsDiffP99pct  float64 `json:"rate_abs_diff_p99_pct"`
	ClientRateP50      float64 `json:"client_rate_p50"`
	TokentapRateP50    float64 `json:"tokentap_rate_p50"`
	RateUndefinedSpans int     `json:"rate_undefined"`
}

// target is one of the overhead targets and where the run left it.
type target struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
	Note string `json:"note,omitempty"`
}

// quantile is the nearest-rank q-quantile of sorted values.
func quantile(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func median(v []int64) int64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return quantile(s, 0.5)
}

func ptr(v float64) *float64 { return &v }

// build computes the report's figures from what the run collected.
func (rep *report) build(b *bench) {
	if len(b.loads) > 0 {
		rep.LoadAverage.Min, rep.LoadAverage.Max = slices.Min(b.loads), slices.Max(b.loads)
	}
	for li, lv := range b.o.levels {
		lr := levelReport{level: lv}
		for pi := range numPaths {
			lr.Paths = append(lr.Paths, b.samples[li][pi].row(b.paths[pi].name, b.paths[pi].proc != nil))
		}
		base := lr.Paths[pathCaddy]
		for pi := range numPaths {
			row := &lr.Paths[pi]
			if pi != pathCaddy {
				row.AddedP50us = ptr(row.DelayP50us - base.DelayP50us)
				row.AddedP99us = ptr(row.DelayP99us - base.DelayP99us)
			}
			if row.CPUPerMillionEvents != nil && base.CPUPerMillionEvents != nil && *base.CPUPerMillionEvents > 0 {
				row.CPUVsCaddy = ptr(*row.CPUPerMillionEvents / *base.CPUPerMillionEvents)
			}
		}
		rep.Levels = append(rep.Levels, lr)
	}
	if len(rep.Memory.Rows) == 3 && rep.Memory.Rows[0].Note == "" {
		base := rep.Memory.Rows[0].PerStreamKiB
		for i := 1; i < 3; i++ {
			if rep.Memory.Rows[i].Note == "" {
				rep.Memory.Rows[i].VsCaddyKiB = ptr(rep.Memory.Rows[i].PerStreamKiB - base)
			}
		}
	}
	spans, err := readSpans(b.spansFile)
	if err != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("tokentap's spans could not be read: %v", err))
	}
	rep.Accuracy = accuracy(b, spans)
	if b.o.compare != "" {
		// The targets read the fourth path as the A/A control.
		rep.Notes = append(rep.Notes, "no targets judged: --compare ran a second tokentap build in place of the A/A control")
		return
	}
	rep.Targets = rep.targets()
}

func (s *samples) row(name string, proxied bool) pathRow {
	slices.Sort(s.ttft)
	slices.Sort(s.delays)
	row := pathRow{
		Path: name, Requests: s.requests, Failed: s.failed, Events: s.events,
		TTFTP50ms:  float64(quantile(s.ttft, 0.5)) / 1e6,
		TTFTP99ms:  float64(quantile(s.ttft, 0.99)) / 1e6,
		DelayP50us: float64(quantile(s.delays, 0.5)) / 1e3,
		DelayP99us: float64(quantile(s.delays, 0.99)) / 1e3,
	}
	if len(s.errors) > 0 {
		row.Errors = s.errors
	}
	if proxied {
		cpu := float64(s.cpuTicks) / clockTicks
		row.CPUSeconds = ptr(cpu)
		if s.events > 0 {
			row.CPUPerMillionEvents = ptr(cpu / float64(s.events) * 1e6)
		}
		if s.cpuTicks > 0 {
			row.CPUOutsideCells = ptr(float64(s.cpuTicks-s.cellTicks) / float64(s.cpuTicks))
		}
		row.Cells = s.cells
	}
	return row
}

// accuracy matches tokentap's spans with the client's requests by response
// id, level by level.
func accuracy(b *bench, spans []sinkSpan) []accuracyRow {
	type pair struct {
		client, tokentap time.Duration
		clientRate, rate float64
		rateUndefined    bool
	}
	pairs := make([][]pair, len(b.o.levels))
	matched := map[string]bool{}
	for _, sp := range spans {
		cv, ok := b.byID[sp.ResponseID]
		if !ok || matched[sp.ResponseID] || sp.TTFT == nil {
			continue
		}
		matched[sp.ResponseID] = true
		p := pair{client: cv.ttft, tokentap: time.Duration(*sp.TTFT * float64(time.Second)), clientRate: cv.rate}
		if sp.Rate != nil && cv.rate > 0 {
			p.rate = *sp.Rate
		} else {
			p.rateUndefined = true
		}
		pairs[cv.level] = append(pairs[cv.level], p)
	}
	unmatched := make([]int, len(b.o.levels))
	for id, cv := range b.byID {
		if !matched[id] {
			unmatched[cv.level]++
		}
	}
	var rows []accuracyRow
	for li, lv := range b.o.levels {
		row := accuracyRow{Concurrency: lv.Concurrency, Matched: len(pairs[li]), Unmatched: unmatched[li]}
		var client, tt, diff, rateDiff, rateAbs, clientRate, ttRate []int64
		for _, p := range pairs[li] {
			client = append(client, int64(p.client))
			tt = append(tt, int64(p.tokentap))
			diff = append(diff, int64(p.client-p.tokentap))
			if p.rateUndefined {
				row.RateUndefinedSpans++
				continue
			}
			// Rates in milli-tokens/s and differences in parts per
			// million keep integer quantiles exact enough.
			d := (p.rate - p.clientRate) / p.clientRate * 1e6
			rateDiff = append(rateDiff, int64(d))
			rateAbs = append(rateAbs, int64(math.Abs(d)))
			clientRate = append(clientRate, int64(p.clientRate*1e3))
			ttRate = append(ttRate, int64(p.rate*1e3))
		}
		for _, s := range [][]int64{client, tt, diff, rateDiff, rateAbs, clientRate, ttRate} {
			slices.Sort(s)
		}
		row.ClientTTFTP50ms = float64(quantile(client, 0.5)) / 1e6
		row.TokentapTTFTP50ms = float64(quantile(tt, 0.5)) / 1e6
		row.TTFTDiffP50ms = float64(quantile(diff, 0.5)) / 1e6
		row.TTFTDiffP99ms = float64(quantile(diff, 0.99)) / 1e6
		row.RateDiffP50pct = float64(quantile(rateDiff, 0.5)) / 1e4
		row.RateAbsDiffP99pct = float64(quantile(rateAbs, 0.99)) / 1e4
		row.ClientRateP50 = float64(quantile(clientRate, 0.5)) / 1e3
		row.TokentapRateP50 = float64(quantile(ttRate, 0.5)) / 1e3
		rows = append(rows, row)
	}
	return rows
}

// targets judges the run against the overhead targets.
func (rep *report) targets() []target {
	var out []target
	var at *levelReport
	for i := range rep.Levels {
		if rep.Levels[i].Concurrency == targetLevel {
			at = &rep.Levels[i]
		}
	}
	if at == nil {
		out = append(out, target{Name: "delay and CPU at concurrency 64", Want: "a level at concurrency 64", Got: "not run"})
	} else {
		tt, control, caddy := at.Paths[pathTokentap], at.Paths[pathControl], at.Paths[pathCaddy]
		if tt.AddedP50us != nil && control.AddedP50us != nil {
			out = append(out, target{
				Name: "added per-event delay p50, concurrency 64",
				Want: fmt.Sprintf("≤ %.0f µs", targetAddedP50),
				Got:  fmt.Sprintf("%+.1f µs", *tt.AddedP50us),
				Met:  *tt.AddedP50us <= targetAddedP50,
				Note: fmt.Sprintf("A/A difference %+.1f µs", *control.AddedP50us),
			})
			noise := math.Abs(*control.AddedP99us)
			out = append(out, target{
				Name: "added per-event delay p99, concurrency 64",
				Want: fmt.Sprintf("inside the A/A noise (≤ %.1f µs)", noise),
				Got:  fmt.Sprintf("%+.1f µs", *tt.AddedP99us),
				Met:  *tt.AddedP99us <= noise,
				Note: fmt.Sprintf("Caddy's own p99 %.1f µs", caddy.DelayP99us),
			})
		}
		if tt.CPUVsCaddy != nil && control.CPUVsCaddy != nil {
			out = append(out, target{
				Name: "proxy CPU per event, concurrency 64",
				Want: fmt.Sprintf("≤ %.2f × Caddy", targetCPURatio),
				Got:  fmt.Sprintf("%.2f ×", *tt.CPUVsCaddy),
				Met:  *tt.CPUVsCaddy <= targetCPURatio,
				Note: fmt.Sprintf("A/A %.2f ×", *control.CPUVsCaddy),
			})
		}
	}
	if rows := rep.Memory.Rows; len(rows) == 3 && rows[1].VsCaddyKiB != nil {
		note := ""
		if rows[2].VsCaddyKiB != nil {
			note = fmt.Sprintf("A/A %+.1f KiB", *rows[2].VsCaddyKiB)
		}
		out = append(out, target{
			Name: fmt.Sprintf("memory per open stream (%d streams)", rep.Memory.Streams),
			Want: fmt.Sprintf("≤ %.0f KiB above Caddy", targetMemoryKiB),
			Got:  fmt.Sprintf("%+.1f KiB", *rows[1].VsCaddyKiB),
			Met:  *rows[1].VsCaddyKiB <= targetMemoryKiB,
			Note: note,
		})
	} else {
		out = append(out, target{Name: "memory per open stream", Want: fmt.Sprintf("≤ %.0f KiB above Caddy", targetMemoryKiB), Got: "not measured"})
	}
	for _, a := range rep.Accuracy {
		if a.Matched == 0 {
			out = append(out, target{Name: fmt.Sprintf("accuracy, concurrency %d", a.Concurrency), Want: "spans matched to requests", Got: "no span matched"})
			continue
		}
		out = append(out, target{
			Name: fmt.Sprintf("TTFT accuracy at the median, concurrency %d", a.Concurrency),
			Want: fmt.Sprintf("within %.0f ms", targetTTFTAccuracyMS),
			Got:  fmt.Sprintf("%.3f ms", a.TTFTDiffP50ms),
			Met:  math.Abs(a.TTFTDiffP50ms) <= targetTTFTAccuracyMS,
			Note: fmt.Sprintf("p99 %.3f ms, %d requests", a.TTFTDiffP99ms, a.Matched),
		}, target{
			Name: fmt.Sprintf("tokens/s accuracy at the median, concurrency %d", a.Concurrency),
			Want: fmt.Sprintf("within %.0f %%", targetRateAccuracy),
			Got:  fmt.Sprintf("%+.2f %%", a.RateDiffP50pct),
			Met:  math.Abs(a.RateDiffP50pct) <= targetRateAccuracy,
			Note: fmt.Sprintf("|difference| p99 %.2f %%", a.RateAbsDiffP99pct),
		})
	}
	return out
}

// cell escapes the pipes of a table cell's text, such as |difference|,
// which would otherwise end the cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func opt(v *float64, format string) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf(format, *v)
}

// writeMarkdown prints the report as Markdown under a heading of its own.
func (rep *report) writeMarkdown(w io.Writer) {
	if rep.Suite != nil {
		rep.Suite.writeMarkdown(w)
		return
	}
	fmt.Fprintf(w, "## Overhead benchmark, %s\n\n", rep.Started.UTC().Format("2006-01-02 15:04 MST"))
	rep.writeResults(w)
}

// writeResults prints the report's figures as Markdown, with ### headings:
// docs/BENCHMARKS.md's current results are this text, rendered from the
// newest results file (--render, TestBenchmarksDoc).
func (rep *report) writeResults(w io.Writer) {
	var b strings.Builder
	m := rep.Machine
	fmt.Fprintf(&b, "Run %s", rep.Started.UTC().Format("2006-01-02 15:04 MST"))
	if rep.Commit != "" {
		fmt.Fprintf(&b, " at commit %s", rep.Commit)
		if rep.Dirty {
			b.WriteString(" with uncommitted changes")
		}
	}
	b.WriteString(". ")
	fmt.Fprintf(&b, "Machine: %s, %d CPUs, %.0f GiB, Linux %s, %s. ", m.CPU, m.CPUs, m.MemoryGiB, m.Kernel, m.Go)
	fmt.Fprintf(&b, "Load average (1 min): %.2f at the start (5 min %.2f, 15 min %.2f), %.2f at the end, %.2f–%.2f over the cells. ",
		rep.LoadAverage.Start, rep.LoadAverage.Start5, rep.LoadAverage.Start15, rep.LoadAverage.End, rep.LoadAverage.Min, rep.LoadAverage.Max)
	fmt.Fprintf(&b, "Run time %.0f s.\n\n", rep.Seconds)
	if rep.Machine.CPUs > 0 && rep.LoadAverage.Max > float64(rep.Machine.CPUs) {
		// A load above the CPU count means runnable work waiting, some of
		// it not the benchmark's: the figures then carry other jobs' noise.
		fmt.Fprintf(&b, "The machine was busy during this run: the load average rose above its %d CPUs over the cells, so other work competed with the proxies. Read each figure against the A/A control's, and re-take the run on a quieter machine before relying on a small difference.\n\n", rep.Machine.CPUs)
	}
	fmt.Fprintf(&b, "Command: `%s`; %d rounds of %g s per path and level, simulator time to first token %g ms.\n\n",
		rep.Command, rep.Settings.Rounds, rep.Settings.CellSeconds, rep.Settings.TTFTMillis)

	for _, lr := range rep.Levels {
		fmt.Fprintf(&b, "### Concurrency %d: %d-token streams at %g tokens/s\n\n", lr.Concurrency, lr.Tokens, lr.TokensPerSecond)
		b.WriteString("| path | requests | events | TTFT p50 ms | TTFT p99 ms | delay p50 µs | delay p99 µs | added p50 µs | added p99 µs | CPU s / M events | CPU vs Caddy |\n")
		b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, r := range lr.Paths {
			requests := fmt.Sprint(r.Requests)
			if r.Failed > 0 {
				requests += fmt.Sprintf(" (%d failed: %v)", r.Failed, r.Errors)
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %.2f | %.2f | %.1f | %.1f | %s | %s | %s | %s |\n",
				r.Path, requests, r.Events, r.TTFTP50ms, r.TTFTP99ms, r.DelayP50us, r.DelayP99us,
				opt(r.AddedP50us, "%+.1f"), opt(r.AddedP99us, "%+.1f"),
				opt(r.CPUPerMillionEvents, "%.1f"), opt(r.CPUVsCaddy, "%.2f ×"))
		}
		b.WriteString("\n")
		var outside []string
		for _, r := range lr.Paths {
			if r.CPUOutsideCells != nil {
				outside = append(outside, fmt.Sprintf("%s %.1f %%", r.Path, *r.CPUOutsideCells*100))
			}
		}
		if len(outside) > 0 {
			fmt.Fprintf(&b, "Each proxy's CPU is counted from the first cell to %g s after the last; of it, outside its own cells: %s.\n\n",
				drainAfterRounds.Seconds(), strings.Join(outside, ", "))
		}
	}

	fmt.Fprintf(&b, "### Resident memory per open stream, %d streams\n\n", rep.Memory.Streams)
	b.WriteString("| proxy | idle RSS MiB | RSS with the streams open MiB | per stream KiB | vs Caddy KiB | samples |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rep.Memory.Rows {
		if r.Note != "" {
			fmt.Fprintf(&b, "| %s | not measured: %s | | | | |\n", r.Path, r.Note)
			continue
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.1f | %s | %d |\n",
			r.Path, r.IdleKiB/1024, r.OpenKiB/1024, r.PerStreamKiB, opt(r.VsCaddyKiB, "%+.1f"), r.Samples)
	}
	b.WriteString("\n")

	b.WriteString("### Accuracy: tokentap's spans against the client\n\n")
	b.WriteString("| concurrency | requests | TTFT p50 client / tokentap ms | difference p50 ms | p99 ms | tokens/s p50 client / tokentap | difference p50 | abs. p99 |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, a := range rep.Accuracy {
		req := fmt.Sprint(a.Matched)
		if a.Unmatched > 0 {
			req += fmt.Sprintf(" (%d without a span)", a.Unmatched)
		}
		fmt.Fprintf(&b, "| %d | %s | %.2f / %.2f | %.3f | %.3f | %.2f / %.2f | %+.2f %% | %.2f %% |\n",
			a.Concurrency, req, a.ClientTTFTP50ms, a.TokentapTTFTP50ms, a.TTFTDiffP50ms, a.TTFTDiffP99ms,
			a.ClientRateP50, a.TokentapRateP50, a.RateDiffP50pct, a.RateAbsDiffP99pct)
	}
	b.WriteString("\n### Targets\n\n| target | want | got | met | |\n| --- | --- | --- | --- | --- |\n")
	for _, t := range rep.Targets {
		met := "no"
		if t.Met {
			met = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(t.Name), cell(t.Want), cell(t.Got), met, cell(t.Note))
	}
	if len(rep.Notes) > 0 {
		b.WriteString("\nNotes:\n\n")
		for _, n := range rep.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	_, _ = io.WriteString(w, b.String()) // the report's last stop; nothing to do on failure
}

// describeMachine reads what the figures depend on.
func describeMachine(binary string) machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), Binary: binary}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				var kb float64
				fmt.Sscanf(strings.TrimSpace(v), "%f", &kb)
				m.MemoryGiB = kb / (1 << 20)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

func commandLine() string {
	return strings.Join(append([]string{"go run ./test/bench/overhead"}, os.Args[1:]...), " ")
}

func settingsOf(o options) settings {
	return settings{Levels: o.levels, Rounds: o.rounds, CellSeconds: o.cell.Seconds(),
		TTFTMillis: float64(o.ttft) / 1e6, RSSStreams: o.rssStreams, Short: o.short}
}
