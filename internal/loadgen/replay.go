package loadgen

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Planned is one request of a replay (Config.Schedule).
type Planned struct {
	// At is when it starts, from the run's start.
	At time.Duration
	// Prompt is its user message; empty means Config's prompts.
	Prompt string
	// MaxTokens is its output cap; 0 means Config.MaxTokens.
	MaxTokens int
	// Group is what the report compares it under: the recorded model.
	Group string
}

// validateSchedule checks a replay's settings and bounds its request
// count by its schedule.
func (cfg *Config) validateSchedule() error {
	switch {
	case cfg.Rate > 0:
		return fmt.Errorf("a replay's schedule sets the arrivals: --rate does not apply")
	case cfg.Warmup > 0:
		return fmt.Errorf("a replay sends the recorded requests only: --warmup does not apply")
	case cfg.Requests > len(cfg.Schedule):
		return fmt.Errorf("requests %d: the replay has %d", cfg.Requests, len(cfg.Schedule))
	}
	for i, p := range cfg.Schedule {
		if p.At < 0 || p.MaxTokens < 0 || (i > 0 && p.At < cfg.Schedule[i-1].At) {
			return fmt.Errorf("replay request %d: offsets must be at least 0 and in order, caps at least 0", i)
		}
	}
	if cfg.Requests == 0 {
		cfg.Requests = len(cfg.Schedule)
	}
	return nil
}

// Recorded is one request of a recording or trace, as a replay needs it.
type Recorded struct {
	// At is its arrival offset from the recording's first request.
	At time.Duration
	// Model is the model it asked for; empty for a trace without one.
	Model string
	// Prompt is the recorded prompt, when content was captured; else the
	// replay makes one of InputTokens tokens, sharing blocks of
	// BlockTokens where HashIDs (a mooncake trace's) are the same.
	Prompt      string
	InputTokens int
	HashIDs     []int
	// OutputTokens is its output length (0 when unknown), which the
	// replay asks the candidate for as its cap; MaxTokens the cap the
	// request had, used when the length is unknown.
	OutputTokens int
	MaxTokens    int
	// Measured is set when tokentap measured it (a recording's completed
	// request): then TimeToFirstToken, OutputTokensPerSecond and Duration
	// are what it measured, and UsageReported says the output count was
	// the provider's.
	Measured              bool
	Failed                string
	TimeToFirstToken      time.Duration
	OutputTokensPerSecond float64
	Duration              time.Duration
	UsageReported         bool
}

// BlockTokens is the tokens a hash id stands for in a mooncake trace.
const BlockTokens = 512

// traceGroup names the requests of a trace that records no model.
const traceGroup = "(trace)"

func (r *Recorded) group() string {
	if r.Model == "" {
		return traceGroup
	}
	return r.Model
}

// ReplayReport sets a recording's measurements and a candidate's side by
// side, per recorded model.
type ReplayReport struct {
	// Candidate is the model the replay asked for; TimeScale what the
	// recorded offsets were multiplied by.
	CandidateModel string  `json:"candidate_model"`
	TimeScale      float64 `json:"time_scale"`
	// StartLateness is how far behind its scaled offset each request
	// started, in seconds: near zero, the arrivals were replayed as
	// recorded.
	StartLateness Quantiles `json:"start_lateness_seconds"`
	// Recorded has, per recorded model, what tokentap measured when the
	// traffic was live (nothing for a trace, which has no measurements);
	// Candidate what the candidate did with the same requests, under the
	// same names.
	Recorded  *Report `json:"recorded"`
	Candidate *Report `json:"candidate"`
}

// Replay sends recs to cfg's model at their recorded offsets times
// timeScale, with their lengths, and reports the recording and the
// candidate side by side. A request without a recorded prompt gets one of
// its recorded input length (BlockPrompt).
func Replay(ctx context.Context, cfg Config, recs []Recorded, timeScale float64) (*ReplayReport, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("the replay has no request")
	}
	if !(timeScale > 0) || math.IsInf(timeScale, 0) {
		return nil, fmt.Errorf("time scale must be a positive number, got %v", timeScale)
	}
	if len(cfg.Models) != 1 {
		return nil, fmt.Errorf("a replay sends every request to one candidate model, got %d", len(cfg.Models))
	}
	cfg.Schedule = make([]Planned, len(recs))
	for i := range recs {
		r := &recs[i]
		p := Planned{At: time.Duration(float64(r.At) * timeScale), Group: r.group(), MaxTokens: r.OutputTokens}
		if p.MaxTokens <= 0 {
			p.MaxTokens = r.MaxTokens
		}
		cfg.Schedule[i] = p
	}
	if cfg.Prompt == nil {
		cfg.Prompt = func(seq int) string { return recs[seq].prompt(seq) }
	}
	results := make([]*Result, len(recs))
	onResult := cfg.OnResult
	cfg.OnResult = func(r *Result) {
		results[r.Seq] = r
		if onResult != nil {
			onResult(r)
		}
	}
	rep, err := Run(ctx, cfg)
	if err != nil {
		return nil, err
	}

	groups := groupOrder(recs)
	out := &ReplayReport{CandidateModel: cfg.Models[0], TimeScale: timeScale}
	late := newSeries()
	cand := map[string]*modelStats{}
	for _, g := range groups {
		cand[g] = newModelStats(g)
		cand[g].slo = cfg.SLO
	}
	for i, r := range results {
		if r == nil {
			continue // not started: the run was stopped
		}
		cand[r.Group].add(r)
		late.add(max(0, r.Start.Sub(rep.Started.Add(time.Duration(float64(recs[i].At)*timeScale))).Seconds()))
	}
	out.StartLateness = late.quantiles()
	candidate := *rep
	candidate.Models = nil
	elapsed := time.Duration(rep.Elapsed * float64(time.Second))
	for _, g := range groups {
		candidate.Models = append(candidate.Models, cand[g].finish(rep.Started, elapsed))
	}
	out.Candidate = &candidate
	out.Recorded = recordedReport(recs, groups, rep.Started)
	return out, nil
}

// groupOrder is the recorded models in order of first appearance.
func groupOrder(recs []Recorded) []string {
	var out []string
	for i := range recs {
		if g := recs[i].group(); !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	return out
}

// recordedReport is the recording's measurements in a Report's shape,
// through the same sketches as a run's, so that both sides' quantiles
// have the same accuracy. Its start is the replay's, so that both sides'
// timelines share an axis.
func recordedReport(recs []Recorded, groups []string, start time.Time) *Report {
	models := map[string]*modelStats{}
	for _, g := range groups {
		models[g] = newModelStats(g)
	}
	total := newModelStats("")
	var end time.Duration
	for i := range recs {
		r := recordedResult(&recs[i], start)
		models[r.Model].add(r)
		total.add(r)
		end = max(end, recs[i].At+recs[i].Duration)
	}
	rep := &Report{Started: start, Elapsed: end.Seconds(), Total: total.finish(start, end)}
	for _, g := range groups {
		rep.Models = append(rep.Models, models[g].finish(start, end))
	}
	return rep
}

// recordedResult is a recorded request as a Result whose measures are the
// recorded ones: the decode window is set so that OutputTokensPerSecond
// gives back the recorded rate.
func recordedResult(rec *Recorded, start time.Time) *Result {
	r := &Result{Model: rec.group(), Start: start.Add(rec.At), End: rec.Duration}
	if !rec.Measured {
		r.ErrorKind = "unmeasured"
		if rec.Failed != "" {
			r.ErrorKind = rec.Failed
		}
		return r
	}
	r.OutputTokens, r.UsageReported = max(rec.OutputTokens, 0), rec.UsageReported
	r.ContentEvents = r.OutputTokens
	r.FirstToken = rec.TimeToFirstToken
	r.LastToken = r.FirstToken
	if rec.OutputTokensPerSecond > 0 && r.OutputTokens > 1 {
		r.LastToken += time.Duration(float64(r.OutputTokens-1) / rec.OutputTokensPerSecond * float64(time.Second))
	}
	return r
}

// prompt is the replayed prompt of rec: the recorded text, or one made to
// its length.
func (rec *Recorded) prompt(seq int) string {
	switch {
	case rec.Prompt != "":
		return rec.Prompt
	case rec.InputTokens < 1:
		return DefaultPrompt
	case len(rec.HashIDs) > 0:
		return BlockPrompt(rec.HashIDs, rec.InputTokens)
	default:
		return blockText(-1-seq, rec.InputTokens)
	}
}

// BlockPrompt makes a prompt of inputTokens tokens from a mooncake trace's
// hash ids: block i is BlockTokens words drawn from a generator seeded by
// hashIDs[i], the last block cut to what is left, so that requests whose
// ids share a prefix share that prefix of text, as the trace's did, and a
// server's prefix cache sees what it saw. Each word is one token with its
// leading space in o200k and cl100k (sizedWords).
func BlockPrompt(hashIDs []int, inputTokens int) string {
	var b strings.Builder
	left := inputTokens
	for i, id := range hashIDs {
		n := BlockTokens
		if i == len(hashIDs)-1 || left < n {
			n = left
		}
		if n <= 0 {
			break
		}
		b.WriteString(blockText(id, n))
		left -= n
	}
	if left > 0 {
		// Fewer ids than blocks: the rest is unshared text.
		b.WriteString(blockText(-1-inputTokens, left))
	}
	return b.String()
}

// blockText is the first n words of the block seeded by id, each with its
// leading space.
func blockText(id, n int) string {
	rnd := rand.New(rand.NewPCG(uint64(int64(id)), 0xb10c))
	var b strings.Builder
	b.Grow(n * 8)
	for range n {
		b.WriteByte(' ')
		b.WriteString(sizedWords[rnd.IntN(len(sizedWords))])
	}
	return b.String()
}

// WriteTable writes, per recorded model, the recording's and the
// candidate's figures one above the other.
func (rr *ReplayReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "MODEL\tSIDE\tREQUESTS\tOK\tTTFT_P50\tTTFT_P95\tTOK/S_P50\tTOK/S_P95\tOUT_TOKENS\t\n")
	for i, rec := range rr.Recorded.Models {
		var c ModelReport
		if i < len(rr.Candidate.Models) {
			c = rr.Candidate.Models[i]
		}
		for _, side := range []struct {
			name string
			m    ModelReport
		}{{"recorded", rec}, {rr.CandidateModel, c}} {
			m := side.m
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t\n", rec.Model, side.name, m.Requests, m.Succeeded,
				ms(m.TimeToFirstToken, m.TimeToFirstToken.P50), ms(m.TimeToFirstToken, m.TimeToFirstToken.P95),
				rate(m.OutputTokensPerSecond, m.OutputTokensPerSecond.P50), rate(m.OutputTokensPerSecond, m.OutputTokensPerSecond.P95),
				m.OutputTokens)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d requests replayed at %gx their recorded offsets, with their recorded lengths.\n"+
		"Started behind their offsets: p50 %.1f ms, p99 %.1f ms.\n"+
		"TTFT: time to first token. TOK/S: output tokens per second after the first token, per request.\n",
		rr.Candidate.Total.Requests, rr.TimeScale, rr.StartLateness.P50*1000, rr.StartLateness.P99*1000)
	if err != nil {
		return err
	}
	// The candidate's reported usage against the tokenizer, as a load
	// run's table has it: the recorded side has no text to count.
	_, err = io.WriteString(w, usageLine(rr.Candidate))
	return err
}
