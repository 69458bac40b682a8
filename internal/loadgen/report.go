package loadgen

import (
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
)

// relativeAccuracy is the sketches' bound on a quantile's relative error: a
// reported p99 of 100 ms is the true one within ±0.5 ms. Sketches keep the
// memory of a run constant however long it is, which inter-token latencies
// (one per token) would otherwise not.
const relativeAccuracy = 0.005

// Report is what a run measured, per model, in the units OpenTelemetry's
// GenAI conventions use (seconds, tokens per second).
type Report struct {
	// API and URL are the wire format and the resolved endpoint.
	API API    `json:"api"`
	URL string `json:"url"`
	// Concurrency is the number of clients, or with Rate the cap on
	// requests in flight; Rate is the requests started per second in
	// rate mode, else zero.
	Concurrency int     `json:"concurrency"`
	Rate        float64 `json:"rate,omitempty"`
	// SLO is the objective of Goodput, when set: ttft in seconds, tps.
	SLO *SLOReport `json:"slo,omitempty"`
	// Arrival and Burstiness are the rate mode's spacing of requests;
	// Warmup the requests sent first and left out of the report.
	Arrival    Arrival `json:"arrival,omitempty"`
	Burstiness float64 `json:"burstiness,omitempty"`
	Warmup     int     `json:"warmup,omitempty"`
	// Started is when the run began.
	Started time.Time `json:"started"`
	// Elapsed is from the run's start to the last request's end, in
	// seconds.
	Elapsed float64 `json:"elapsed_seconds"`
	// LateStarts counts rate-mode requests that started more than 10 ms
	// behind schedule because Concurrency were already in flight: the
	// rate asked for was not sustained.
	LateStarts int `json:"late_starts,omitempty"`
	// Tokenizer is the encoding the models' usage_vs_tokenizer counted
	// in (Config.Tokenizer); absent when none was.
	Tokenizer string `json:"tokenizer,omitempty"`
	// ClientCPUSeconds is the CPU time the generator's process used during
	// the run, and ClientCPUShare that over the run's time on all the
	// cores Go uses: near 1, the generator, not the endpoint, may be what
	// limits the figures. Absent where the platform does not say.
	ClientCPUSeconds float64       `json:"client_cpu_seconds,omitempty"`
	ClientCPUShare   float64       `json:"client_cpu_share,omitempty"`
	Models           []ModelReport `json:"models"`
	// Total is every model together.
	Total ModelReport `json:"total"`
}

// ModelReport is one model's share of a run. Only completed requests count
// in the quantiles, so that errors neither flatter nor spoil them; failed
// ones are counted by kind.
type ModelReport struct {
	// Model is the model requested; in Report.Total it is empty.
	Model string `json:"model"`
	// Requests counts the requests sent, Succeeded and Failed how they
	// ended, and Errors the failed ones by kind (see Result.ErrorKind).
	Requests  int            `json:"requests"`
	Succeeded int            `json:"succeeded"`
	Failed    int            `json:"failed"`
	Errors    map[string]int `json:"errors,omitempty"`
	// OutputTokens is the sum over completed requests; UsageReported how
	// many of them had it from the server's usage rather than an event
	// count.
	OutputTokens  int64 `json:"output_tokens"`
	UsageReported int   `json:"usage_reported"`
	// OutputLengthMismatch counts the completed requests whose reported
	// output length is not the Config.MaxTokens asked for: a model that
	// stops early (or a server that ignores the cap) makes lengths, and so
	// throughput, differ between the models compared.
	OutputLengthMismatch int `json:"output_length_mismatch,omitempty"`
	// UsageVsTokenizer sets the reported output tokens against the
	// tokenizer's count of the streamed text; absent without a tokenizer
	// or a request that reported usage (usagecheck.go).
	UsageVsTokenizer *UsageVsTokenizer `json:"usage_vs_tokenizer,omitempty"`
	// Throughput is OutputTokens over the run's elapsed time: what the
	// endpoint delivered to all clients together, the third of the
	// report's three tokens/s (docs/load-testing.md, "Three tokens/s").
	Throughput float64 `json:"throughput_tokens_per_second"`
	// Goodput is the requests and tokens/s that met Config.SLO; absent
	// without one.
	Goodput *Goodput `json:"goodput,omitempty"`
	// TimeToFirstToken (seconds) and OutputTokensPerSecond have one
	// sample per completed request (Result.TimeToFirstToken and
	// Result.OutputTokensPerSecond, when defined); InterTokenLatency
	// (seconds) one per gap between content events.
	TimeToFirstToken      Quantiles `json:"time_to_first_token_seconds"`
	OutputTokensPerSecond Quantiles `json:"output_tokens_per_second"`
	InterTokenLatency     Quantiles `json:"inter_token_latency_seconds"`
	// OutputTokensPerSecondE2E has one sample per completed request:
	// output tokens over the whole request, time to first token included
	// (Result.OutputTokensPerSecondE2E).
	OutputTokensPerSecondE2E Quantiles `json:"output_tokens_per_second_e2e"`
	// Distribution is TimeToFirstToken and OutputTokensPerSecond at fixed
	// probabilities, for a CDF; Timeline the requests over the run's time
	// (distribution.go, timeline.go). Both are absent without a request.
	Distribution *Distribution `json:"distribution,omitempty"`
	Timeline     *Timeline     `json:"timeline,omitempty"`
}

// Quantiles summarise one measure over a run: the number of samples, their
// exact mean, and quantiles within the sketch's relative accuracy (0.5 %).
// All are zero when there was no sample.
type Quantiles struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
}

// series collects one measure: a sketch for the quantiles and the exact
// sum, which the sketch only approximates, for the mean.
type series struct {
	s   *ddsketch.DDSketch
	sum float64
}

func newSeries() *series {
	s, err := ddsketch.NewDefaultDDSketch(relativeAccuracy)
	if err != nil {
		panic(err) // the accuracy is a valid constant
	}
	return &series{s: s}
}

// add records v; the sketch takes only positive values and zero, so a
// negative (impossible for durations and rates) is dropped rather than
// failing the run.
func (s *series) add(v float64) {
	if v >= 0 && s.s.Add(v) == nil {
		s.sum += v
	}
}

func (s *series) quantiles() Quantiles {
	n := int(s.s.GetCount())
	if n == 0 {
		return Quantiles{}
	}
	qs, _ := s.s.GetValuesAtQuantiles([]float64{0.5, 0.95, 0.99}) // not empty, valid quantiles
	return Quantiles{Count: n, Mean: s.sum / float64(n), P50: qs[0], P95: qs[1], P99: qs[2]}
}

// modelStats accumulates one model's results.
type modelStats struct {
	report               ModelReport
	ttft, tps, gaps, e2e *series
	timeline             *timeline
	usage                usageCheck
	slo                  SLO
	maxTokens            int
	met                  int
	metTokens            int64
}

func newModelStats(model string) *modelStats {
	return &modelStats{
		report: ModelReport{Model: model, Errors: map[string]int{}},
		ttft:   newSeries(), tps: newSeries(), gaps: newSeries(), e2e: newSeries(),
		timeline: newTimeline(),
	}
}

func (m *modelStats) add(r *Result) {
	m.report.Requests++
	m.timeline.add(r)
	if !r.OK() {
		m.report.Failed++
		m.report.Errors[r.ErrorKind]++
		return
	}
	m.report.Succeeded++
	m.report.OutputTokens += int64(r.OutputTokens)
	m.usage.add(r)
	if r.UsageReported {
		m.report.UsageReported++
		if m.maxTokens > 0 && r.OutputTokens != m.maxTokens {
			m.report.OutputLengthMismatch++
		}
	}
	if ttft := r.TimeToFirstToken(); ttft > 0 {
		m.ttft.add(ttft.Seconds())
	}
	if tps := r.OutputTokensPerSecond(); tps > 0 {
		m.tps.add(tps)
	}
	if tps := r.OutputTokensPerSecondE2E(); tps > 0 {
		m.e2e.add(tps)
	}
	if m.slo.Set() && m.slo.Met(r) {
		m.met++
		m.metTokens += int64(r.OutputTokens)
	}
	for _, g := range r.Gaps {
		m.gaps.add(g.Seconds())
	}
}

func (m *modelStats) finish(start time.Time, elapsed time.Duration) ModelReport {
	rep := m.report
	rep.Errors = maps.Clone(rep.Errors)
	if len(rep.Errors) == 0 {
		rep.Errors = nil
	}
	if elapsed > 0 {
		rep.Throughput = float64(rep.OutputTokens) / elapsed.Seconds()
	}
	rep.OutputTokensPerSecondE2E = m.e2e.quantiles()
	if m.slo.Set() {
		g := &Goodput{Met: m.met}
		if rep.Requests > 0 {
			g.Attainment = float64(m.met) / float64(rep.Requests)
		}
		if elapsed > 0 {
			g.TokenGoodput = float64(m.metTokens) / elapsed.Seconds()
		}
		rep.Goodput = g
	}
	rep.TimeToFirstToken = m.ttft.quantiles()
	rep.OutputTokensPerSecond = m.tps.quantiles()
	rep.InterTokenLatency = m.gaps.quantiles()
	rep.Distribution = m.distribution()
	rep.UsageVsTokenizer = m.usage.report()
	rep.Timeline = m.timeline.report(start)
	return rep
}

// aggregator collects results from every worker.
type aggregator struct {
	cfg    *Config
	mu     sync.Mutex
	models map[string]*modelStats
	total  *modelStats
	last   time.Time // the latest end of a request
	first  time.Time // the earliest start of a counted request
}

func newAggregator(cfg *Config) *aggregator {
	a := &aggregator{cfg: cfg, models: map[string]*modelStats{}, total: newModelStats("")}
	a.total.slo, a.total.maxTokens = cfg.SLO, cfg.MaxTokens
	for _, m := range cfg.Models {
		a.models[m] = newModelStats(m)
		a.models[m].slo, a.models[m].maxTokens = cfg.SLO, cfg.MaxTokens
	}
	return a
}

func (a *aggregator) add(r *Result) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.models[r.Model].add(r)
	a.total.add(r)
	if a.first.IsZero() || r.Start.Before(a.first) {
		a.first = r.Start
	}
	if end := r.Start.Add(r.End); end.After(a.last) {
		a.last = end
	}
}

func (a *aggregator) report(start, now time.Time, late int) *Report {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cfg.Warmup > 0 && !a.first.IsZero() {
		// The measured part begins with the first counted request.
		start = a.first
	}
	end := a.last
	if end.IsZero() || end.Before(start) {
		end = now
	}
	elapsed := end.Sub(start)
	rep := &Report{
		API: a.cfg.API, URL: a.cfg.URL, Concurrency: a.cfg.Concurrency, Rate: a.cfg.Rate,
		Arrival: a.cfg.Arrival, Burstiness: a.cfg.Burstiness, Warmup: a.cfg.Warmup, SLO: sloReport(a.cfg.SLO),
		Started: start, Elapsed: elapsed.Seconds(), LateStarts: late, Tokenizer: a.cfg.Tokenizer,
		Total: a.total.finish(start, elapsed),
	}
	// In the order given, which is the order the user thinks of them in;
	// a model named twice is reported once.
	seen := map[string]bool{}
	for _, m := range a.cfg.Models {
		if !seen[m] {
			seen[m] = true
			rep.Models = append(rep.Models, a.models[m].finish(start, elapsed))
		}
	}
	return rep
}

// clientCPUWarn is the share of the machine's CPU over which the table
// warns that the generator may be the bottleneck.
const clientCPUWarn = 0.7

// setClientCPU records the generator's CPU time over wall.
func (rep *Report) setClientCPU(cpu, wall time.Duration) {
	rep.ClientCPUSeconds = cpu.Seconds()
	if wall > 0 {
		rep.ClientCPUShare = cpu.Seconds() / (wall.Seconds() * float64(runtime.GOMAXPROCS(0)))
	}
}

// WriteTable writes the report as an aligned table for a terminal:
// durations in milliseconds, rates in tokens per second.
func (rep *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s, %s, %d requests in %.1f s", rep.API, rep.URL, rep.mode(), rep.Total.Requests, rep.Elapsed)
	if rep.LateStarts > 0 {
		fmt.Fprintf(&b, " (%d started late: the rate was not sustained)", rep.LateStarts)
	}
	if rep.ClientCPUShare > clientCPUWarn {
		fmt.Fprintf(&b, "\nwarning: the load generator used %.0f %% of the CPU: it may be the bottleneck, not the endpoint", 100*rep.ClientCPUShare)
	}
	b.WriteString("\n\n")

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	goodput := rep.Total.Goodput != nil
	header := "model\tok\tfailed\tout tokens\ttok/s total\t" +
		"TTFT ms p50\tp95\tp99\ttok/s p50\tp95\tp99\te2e tok/s p50\tITL ms p50\tp95\tp99\t"
	if goodput {
		header += "SLO met\tgoodput tok/s\t"
	}
	fmt.Fprintln(tw, header)
	rows := rep.Models
	if len(rows) > 1 {
		total := rep.Total
		total.Model = "all"
		rows = append(slices.Clip(rows), total)
	}
	for _, m := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t",
			m.Model, m.Succeeded, m.Failed, m.OutputTokens, m.Throughput,
			ms(m.TimeToFirstToken, m.TimeToFirstToken.P50), ms(m.TimeToFirstToken, m.TimeToFirstToken.P95), ms(m.TimeToFirstToken, m.TimeToFirstToken.P99),
			rate(m.OutputTokensPerSecond, m.OutputTokensPerSecond.P50), rate(m.OutputTokensPerSecond, m.OutputTokensPerSecond.P95), rate(m.OutputTokensPerSecond, m.OutputTokensPerSecond.P99),
			rate(m.OutputTokensPerSecondE2E, m.OutputTokensPerSecondE2E.P50),
			ms(m.InterTokenLatency, m.InterTokenLatency.P50), ms(m.InterTokenLatency, m.InterTokenLatency.P95), ms(m.InterTokenLatency, m.InterTokenLatency.P99))
		if goodput && m.Goodput != nil {
			fmt.Fprintf(tw, "%.1f%%\t%.1f\t", 100*m.Goodput.Attainment, m.Goodput.TokenGoodput)
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\ntok/s total: every output token over the run's time (aggregate). tok/s: per request, after the first token\n" +
		"((tokens - 1) / (last token - first token), as tokentap measures it). e2e tok/s: per request, tokens over the whole request.\n")
	if goodput {
		b.WriteString("goodput: the requests that met the SLO (" + sloText(rep.SLO) + "), their tokens over the run's time.\n")
	}
	b.WriteString(usageLine(rep))
	var failures []string
	for _, m := range rep.Models {
		for _, kind := range slices.Sorted(maps.Keys(m.Errors)) {
			failures = append(failures, fmt.Sprintf("%s: %d %s", m.Model, m.Errors[kind], kind))
		}
	}
	if len(failures) > 0 {
		fmt.Fprintf(&b, "\nfailed: %s\n", strings.Join(failures, ", "))
	}
	var short []string
	for _, m := range rep.Models {
		if m.OutputLengthMismatch > 0 {
			short = append(short, fmt.Sprintf("%s: %d of %d", m.Model, m.OutputLengthMismatch, m.UsageReported))
		}
	}
	if len(short) > 0 {
		fmt.Fprintf(&b, "\noutput length not the max tokens asked for: %s (their rates are not comparable)\n", strings.Join(short, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// mode says how the load was sent, for a table's first line.
func (rep *Report) mode() string {
	mode := fmt.Sprintf("concurrency %d", rep.Concurrency)
	if rep.Rate > 0 {
		arrival := ""
		if rep.Arrival == ArrivalPoisson {
			arrival = fmt.Sprintf(" (poisson, burstiness %g)", rep.Burstiness)
		}
		mode = fmt.Sprintf("%g requests/s%s, at most %d in flight", rep.Rate, arrival, rep.Concurrency)
	}
	if rep.Warmup > 0 {
		mode += fmt.Sprintf(", after %d warm-up requests", rep.Warmup)
	}
	return mode
}

func ms(q Quantiles, v float64) string {
	if q.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", v*1e3)
}

func rate(q Quantiles, v float64) string {
	if q.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}
