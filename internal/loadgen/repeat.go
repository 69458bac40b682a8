package loadgen

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/gonum/stat/distuv"
)

// Confidence is the level of a repetition summary's intervals.
const Confidence = 0.95

// MaxRepeat bounds the repetitions of one configuration: each is a whole
// run, and a typo must not run a benchmark for days.
const MaxRepeat = 100

// RepeatReport is one configuration run several times in turn, each run a
// whole one (its warm-up included), and a summary of how each model's
// figures varied from run to run.
type RepeatReport struct {
	// Repeat is the number of repetitions asked for.
	Repeat int `json:"repeat"`
	// Seeds are the runs' seeds, in order: the configuration's seed plus
	// the repetition's number from 0, so that each run draws its own
	// arrivals (and, through the caller, its own prompt lengths) and
	// repetition i can be run alone again with seed+i.
	Seeds []uint64 `json:"seeds"`
	// Runs are the runs' reports, in order.
	Runs []*Report `json:"runs"`
	// Stopped is set when the run was stopped (its context ended) before
	// the repetitions did: the last run, cut short, is in Runs but not in
	// the summary.
	Stopped bool `json:"stopped,omitempty"`
	// Summary is over the whole runs.
	Summary RepeatSummary `json:"summary"`
}

// RepeatSummary is, per model, each figure's mean over the runs and the
// interval in which the mean of the runs' figures lies at the
// Confidence level, by Student's t distribution: with a few runs (3 to
// 10), their spread is itself uncertain, which a normal interval would
// ignore. It is about run-to-run variation (the endpoint's state, the
// network, the draws), not the sampling within a run, which every run's
// quantiles already summarise.
type RepeatSummary struct {
	// Confidence is the intervals' level (0.95) and Method how they are
	// made ("student_t": mean ± t(1 - (1 - confidence)/2, n - 1) ·
	// stdev / √n).
	Confidence float64 `json:"confidence"`
	Method     string  `json:"method"`
	// Models are in the order the runs report them.
	Models []ModelSummary `json:"models"`
}

// ModelSummary is one model's figures over the runs. Each MeanInterval
// has one value per run in which the figure was defined: a run in which
// every request to the model failed has no time to first token.
type ModelSummary struct {
	Model string `json:"model"`
	// Succeeded and Failed are the sums over the runs.
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	// TTFTP50 and TTFTP95 are the runs' p50 and p95 of the time to first
	// token (seconds); TPSP50 and TPSP95 of the output tokens/s after the
	// first token; Throughput the runs' aggregate tokens/s.
	TTFTP50    MeanInterval `json:"ttft_seconds_p50"`
	TTFTP95    MeanInterval `json:"ttft_seconds_p95"`
	TPSP50     MeanInterval `json:"output_tokens_per_second_p50"`
	TPSP95     MeanInterval `json:"output_tokens_per_second_p95"`
	Throughput MeanInterval `json:"throughput_tokens_per_second"`
}

// MeanInterval is the mean of N values and, from two values on, their
// sample standard deviation (n - 1 in the denominator) and the Student-t
// confidence interval of the mean at the Confidence level: Mean ±
// HalfWidth, from CILow to CIHigh. One value says nothing of the
// variation, so with fewer than two those four are absent (and the mean
// of none is zero).
type MeanInterval struct {
	N         int      `json:"n"`
	Mean      float64  `json:"mean"`
	Stdev     *float64 `json:"stdev,omitempty"`
	HalfWidth *float64 `json:"half_width,omitempty"`
	CILow     *float64 `json:"ci_low,omitempty"`
	CIHigh    *float64 `json:"ci_high,omitempty"`
}

// NewMeanInterval summarises values at the Confidence level.
func NewMeanInterval(values []float64) MeanInterval {
	n := len(values)
	iv := MeanInterval{N: n}
	if n == 0 {
		return iv
	}
	var sum float64
	for _, v := range values {
		sum += v
	}
	iv.Mean = sum / float64(n)
	if n < 2 {
		return iv
	}
	var ss float64
	for _, v := range values {
		ss += (v - iv.Mean) * (v - iv.Mean)
	}
	stdev := math.Sqrt(ss / float64(n-1))
	t := TCritical(n - 1)
	half := t * stdev / math.Sqrt(float64(n))
	low, high := iv.Mean-half, iv.Mean+half
	iv.Stdev, iv.HalfWidth, iv.CILow, iv.CIHigh = &stdev, &half, &low, &high
	return iv
}

// TCritical is Student's t at 1 - (1 - Confidence)/2 with df degrees of
// freedom: a two-sided interval at the Confidence level is the estimate
// ± TCritical(df) standard errors.
func TCritical(df int) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}.Quantile(1 - (1-Confidence)/2)
}

// RunRepeat runs cfg n times in turn (1 to MaxRepeat), run i with seed
// cfg.Seed+i, and summarises the runs per model. prepare, if not nil, is
// called with each run's Config (its seed set) before it runs, so that
// what the caller derived from the seed, such as prompts of drawn
// lengths, is drawn afresh too. It stops at the first invalid run or when
// ctx ends.
func RunRepeat(ctx context.Context, cfg Config, n int, prepare func(i int, cfg *Config) error) (*RepeatReport, error) {
	if n < 1 || n > MaxRepeat {
		return nil, fmt.Errorf("repeat must be 1 to %d runs, got %d", MaxRepeat, n)
	}
	out := &RepeatReport{Repeat: n}
	for i := range n {
		run := cfg
		run.Seed = cfg.Seed + uint64(i)
		if prepare != nil {
			if err := prepare(i, &run); err != nil {
				return nil, fmt.Errorf("repetition %d: %w", i+1, err)
			}
		}
		rep, err := Run(ctx, run)
		if err != nil {
			return nil, fmt.Errorf("repetition %d: %w", i+1, err)
		}
		out.Seeds = append(out.Seeds, run.Seed)
		out.Runs = append(out.Runs, rep)
		if ctx.Err() != nil {
			out.Stopped = true
			break
		}
	}
	whole := out.Runs
	if out.Stopped {
		whole = whole[:len(whole)-1]
	}
	out.Summary = summarise(whole)
	return out, nil
}

// summarise makes the per-model summary of whole runs of one
// configuration, which report the same models in the same order.
func summarise(runs []*Report) RepeatSummary {
	s := RepeatSummary{Confidence: Confidence, Method: "student_t", Models: []ModelSummary{}}
	if len(runs) == 0 {
		return s
	}
	for i, m := range runs[0].Models {
		var ttft50, ttft95, tps50, tps95, thr []float64
		ms := ModelSummary{Model: m.Model}
		for _, rep := range runs {
			if i >= len(rep.Models) {
				continue
			}
			r := rep.Models[i]
			ms.Succeeded += r.Succeeded
			ms.Failed += r.Failed
			if r.TimeToFirstToken.Count > 0 {
				ttft50 = append(ttft50, r.TimeToFirstToken.P50)
				ttft95 = append(ttft95, r.TimeToFirstToken.P95)
			}
			if r.OutputTokensPerSecond.Count > 0 {
				tps50 = append(tps50, r.OutputTokensPerSecond.P50)
				tps95 = append(tps95, r.OutputTokensPerSecond.P95)
			}
			if r.Requests > 0 {
				// A run whose requests all failed delivered nothing:
				// that is a throughput of zero, not a missing one.
				thr = append(thr, r.Throughput)
			}
		}
		ms.TTFTP50, ms.TTFTP95 = NewMeanInterval(ttft50), NewMeanInterval(ttft95)
		ms.TPSP50, ms.TPSP95 = NewMeanInterval(tps50), NewMeanInterval(tps95)
		ms.Throughput = NewMeanInterval(thr)
		s.Models = append(s.Models, ms)
	}
	return s
}

// WriteTable writes the summary as a table: each figure's mean over the
// runs ± the half-width of its interval, durations in milliseconds.
func (rr *RepeatReport) WriteTable(w io.Writer) error {
	var b strings.Builder
	if len(rr.Runs) == 0 {
		_, err := io.WriteString(w, "no run\n")
		return err
	}
	first := rr.Runs[0]
	total := 0
	for _, rep := range rr.Runs {
		total += rep.Total.Requests
	}
	reps := fmt.Sprintf("%d repetitions (seeds %d to %d)", len(rr.Runs), rr.Seeds[0], rr.Seeds[len(rr.Seeds)-1])
	if len(rr.Runs) == 1 {
		reps = fmt.Sprintf("1 repetition (seed %d)", rr.Seeds[0])
	}
	fmt.Fprintf(&b, "%s %s, %s, %s, %d requests in all\n", first.API, first.URL, first.mode(), reps, total)
	if rr.Stopped {
		fmt.Fprintf(&b, "stopped during repetition %d of %d, which is left out below\n", len(rr.Runs), rr.Repeat)
	}
	for i, rep := range rr.Runs {
		if rep.ClientCPUShare > clientCPUWarn {
			fmt.Fprintf(&b, "warning: in repetition %d the load generator used %.0f %% of the CPU: it may be the bottleneck, not the endpoint\n", i+1, 100*rep.ClientCPUShare)
		}
	}
	b.WriteString("\n")

	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\truns\tok\tfailed\tTTFT ms p50\tTTFT ms p95\ttok/s p50\ttok/s p95\ttok/s total\t")
	for _, m := range rr.Summary.Models {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t\n", m.Model, m.TTFTP50.N, m.Succeeded, m.Failed,
			plusMinus(m.TTFTP50, 1e3), plusMinus(m.TTFTP95, 1e3), plusMinus(m.TPSP50, 1), plusMinus(m.TPSP95, 1), plusMinus(m.Throughput, 1))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\nmean over the repetitions ± the half-width of its %g %% Student-t interval: the variation from run to run,\n"+
		"not within a run (one repetition gives no interval). tok/s: per request, after the first token; tok/s total: every token over the run's time.\n",
		100*rr.Summary.Confidence)
	var failures []string
	for i, rep := range rr.Runs {
		for _, m := range rep.Models {
			for _, kind := range slices.Sorted(maps.Keys(m.Errors)) {
				failures = append(failures, fmt.Sprintf("repetition %d %s: %d %s", i+1, m.Model, m.Errors[kind], kind))
			}
		}
	}
	if len(failures) > 0 {
		fmt.Fprintf(&b, "\nfailed: %s\n", strings.Join(failures, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// plusMinus is an interval's cell, its values times scale: "-" without a
// value, the mean alone with one.
func plusMinus(iv MeanInterval, scale float64) string {
	switch {
	case iv.N == 0:
		return "-"
	case iv.HalfWidth == nil:
		return fmt.Sprintf("%.1f", iv.Mean*scale)
	}
	return fmt.Sprintf("%.1f ± %.1f", iv.Mean*scale, *iv.HalfWidth*scale)
}
