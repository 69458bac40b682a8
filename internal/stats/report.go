package stats

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
)

// ReportVersion is the version of the Report JSON (GET /tokentap/stats).
const ReportVersion = 1

// Report is the comparison table of one window, the JSON of
// GET /tokentap/stats and of `tokentap stats --json`. Its shape is a
// contract with the page and with users' scripts.
type Report struct {
	// Version is ReportVersion.
	Version int `json:"version"`
	// Window is "1m", "5m" or "1h"; WindowSeconds the same in seconds.
	Window        string `json:"window"`
	WindowSeconds int    `json:"window_seconds"`
	// GeneratedAt is when the view was taken.
	GeneratedAt time.Time `json:"generated_at"`
	// Rows are sorted by provider, model and labels, the overflow row
	// last.
	Rows []ReportRow `json:"rows"`
	// Live is the requests in flight at GeneratedAt, per provider and
	// requested model, sorted; [] when none (live.go).
	Live []LiveRow `json:"live"`
}

// RowID identifies a row of a Report or a Snapshot: rows of several
// snapshots merge when their RowIDs are equal. Its fields are at the top
// level of the row's JSON.
type RowID struct {
	// Provider is gen_ai.provider.name, as on the spans.
	Provider string `json:"provider"`
	// Model is the response's model, else the request's.
	Model string `json:"model"`
	// Labels are the configured labels' values; {} when none.
	Labels map[string]string `json:"labels"`
	// Overflow is true for the row that took keys past the row cap; its
	// provider and model are "_other".
	Overflow bool `json:"overflow"`
}

// rowID is the RowID of r, with its labels as a map (never nil, so that
// the JSON shows {} rather than null).
func rowID(r *AggregateRow) RowID {
	id := RowID{
		Provider: r.Key.Provider,
		Model:    r.Key.Model,
		Labels:   make(map[string]string, len(r.Key.Labels)),
		Overflow: r.Overflow,
	}
	for _, l := range r.Key.Labels {
		id.Labels[l.Name] = l.Value
	}
	return id
}

// ReportRow is one provider, model and set of label values.
type ReportRow struct {
	RowID

	// Requests counts the requests that finished in the window, Errors
	// those with outcome upstream_error, Aborts those with client_abort,
	// Throttled those with throttled (which Errors leaves out).
	Requests  int64 `json:"requests"`
	Errors    int64 `json:"errors"`
	Aborts    int64 `json:"aborts"`
	Throttled int64 `json:"throttled"`
	// Buffered counts the streams that arrived held back and released in
	// one burst at their end (docs/telemetry.md, "Buffered streams").
	Buffered int64 `json:"buffered"`
	// ErrorRate, AbortRate and ThrottledRate are Errors, Aborts and
	// Throttled over Requests; EstimatedShare is the share of requests
	// whose token counts were estimated.
	ErrorRate      float64 `json:"error_rate"`
	AbortRate      float64 `json:"abort_rate"`
	ThrottledRate  float64 `json:"throttled_rate"`
	EstimatedShare float64 `json:"estimated_share"`
	// CostUSD is what the requests with a price cost in the window, in US
	// dollars: the sum the cost metric's quantiles describe one by one.
	CostUSD float64 `json:"cost_usd"`
	// SLO is the row's attainment of its objective; absent when no
	// objective judged a request of the row in the window.
	SLO *SLOSummary `json:"slo,omitempty"`
	// UsageCheck is how the provider's reported output counts compared
	// with the tokenizer's count of the text (verify_usage); absent when
	// no request of the row was verified in the window.
	UsageCheck *UsageCheckSummary `json:"usage_check,omitempty"`
	// Health is whether the row has slowed down compared with its own
	// earlier requests, now; absent on the overflow row.
	Health *HealthReport `json:"health,omitempty"`
	// RateLimit is the latest rate limit state a response of the row
	// reported in its headers (headroom.go); absent when none did.
	RateLimit *RateLimitReport `json:"rate_limit,omitempty"`

	// Metrics are the distributions, one per metric, always all present.
	Metrics ReportMetrics `json:"metrics"`

	// ByInflight is the row's time to first token and output tokens/s by
	// in-flight level, buckets without a request left out, over the last
	// half to whole window (inflight.go).
	ByInflight []InflightPoint `json:"by_inflight,omitempty"`

	// Series is the row's time slices, oldest first, when asked for
	// (series=true): every slice of the window, empty ones included.
	Series []SeriesPoint `json:"series,omitempty"`
}

// InflightPoint is one in-flight bucket of a row.
type InflightPoint struct {
	// InflightMin and InflightMax are the bucket's levels, both
	// included; InflightMax is absent for the last, open-ended bucket.
	InflightMin int64 `json:"inflight_min"`
	InflightMax int64 `json:"inflight_max,omitempty"`
	// Requests counts the bucket's requests.
	Requests int64 `json:"requests"`
	// Metrics are the bucket's distributions, within InflightAccuracy.
	Metrics InflightMetrics `json:"metrics"`
}

// InflightMetrics are the metrics kept by in-flight level.
type InflightMetrics struct {
	TimeToFirstToken      Summary `json:"time_to_first_token"`
	OutputTokensPerSecond Summary `json:"output_tokens_per_second"`
}

// inflightPoints renders a row's in-flight view.
func inflightPoints(r *AggregateRow) []InflightPoint {
	var out []InflightPoint
	for b := range r.inflight {
		agg := &r.inflight[b]
		if agg.requests == 0 {
			continue
		}
		p := InflightPoint{Requests: agg.requests}
		p.InflightMin, p.InflightMax = InflightRange(b)
		for i, m := range inflightMetrics {
			into := &p.Metrics.TimeToFirstToken
			if m == OutputTokensPerSecond {
				into = &p.Metrics.OutputTokensPerSecond
			}
			summarizeOne(into, m, agg.sketches[i])
		}
		out = append(out, p)
	}
	return out
}

// SeriesPoint is one time slice of a row, with the metrics of its
// requests alone.
type SeriesPoint struct {
	// Start is when the slice began; Seconds is its length.
	Start   time.Time `json:"start"`
	Seconds int       `json:"seconds"`
	// Requests and Errors are as in the row.
	Requests int64 `json:"requests"`
	Errors   int64 `json:"errors"`
	// Metrics are as in the row, over the slice's requests.
	Metrics ReportMetrics `json:"metrics"`
}

// SLOSummary is how a row's requests fared against their objective.
type SLOSummary struct {
	// Requests counts the requests judged, Met those that met it.
	Requests int64 `json:"requests"`
	Met      int64 `json:"met"`
	// Attainment is Met over Requests.
	Attainment float64 `json:"attainment"`
	// TokenGoodput is the output tokens of the requests that met it per
	// second of the window: the useful throughput the row delivered.
	TokenGoodput float64 `json:"token_goodput"`
}

// sloSummary is c's SLOSummary over a window of seconds, nil when no
// request was judged.
func sloSummary(c *Counts, seconds float64) *SLOSummary {
	if c.SLORequests == 0 {
		return nil
	}
	return &SLOSummary{
		Requests:     c.SLORequests,
		Met:          c.SLOMet,
		Attainment:   ratio(c.SLOMet, c.SLORequests),
		TokenGoodput: round(float64(c.GoodputTokens) / seconds),
	}
}

// UsageCheckSummary is a row's verify_usage counts.
type UsageCheckSummary struct {
	// Verified counts the requests compared, Mismatches those whose
	// counts differed beyond the tolerance.
	Verified   int64 `json:"verified"`
	Mismatches int64 `json:"mismatches"`
	// ReportedTokens and CountedTokens sum the compared requests'
	// reported output (less hidden reasoning) and counted text tokens;
	// Ratio is ReportedTokens over CountedTokens, 1 when they agree.
	ReportedTokens int64   `json:"reported_tokens"`
	CountedTokens  int64   `json:"counted_tokens"`
	Ratio          float64 `json:"ratio"`
}

// usageCheckSummary is c's UsageCheckSummary, nil when no request was
// verified.
func usageCheckSummary(c *Counts) *UsageCheckSummary {
	if c.UsageVerified == 0 {
		return nil
	}
	return &UsageCheckSummary{
		Verified:       c.UsageVerified,
		Mismatches:     c.UsageMismatches,
		ReportedTokens: c.UsageReported,
		CountedTokens:  c.UsageCounted,
		Ratio:          ratio(c.UsageReported, c.UsageCounted),
	}
}

// ReportMetrics holds one Summary per metric, in the contract's order.
type ReportMetrics struct {
	TimeToFirstToken        Summary `json:"time_to_first_token"`
	TimeToFirstVisibleToken Summary `json:"time_to_first_visible_token"`
	OutputTokensPerSecond   Summary `json:"output_tokens_per_second"`
	TimePerOutputToken      Summary `json:"time_per_output_token"`
	Duration                Summary `json:"duration"`
	InputTokens             Summary `json:"input_tokens"`
	OutputTokens            Summary `json:"output_tokens"`
	Cost                    Summary `json:"cost"`
}

// Get returns metric m's summary.
func (r *ReportMetrics) Get(m Metric) *Summary {
	switch m {
	case TimeToFirstToken:
		return &r.TimeToFirstToken
	case TimeToFirstVisibleToken:
		return &r.TimeToFirstVisibleToken
	case OutputTokensPerSecond:
		return &r.OutputTokensPerSecond
	case TimePerOutputToken:
		return &r.TimePerOutputToken
	case Duration:
		return &r.Duration
	case InputTokens:
		return &r.InputTokens
	case Cost:
		return &r.Cost
	default:
		return &r.OutputTokens
	}
}

// Summary is one metric's distribution in a window: how many requests
// observed it and its quantiles, which are absent when the count is 0.
type Summary struct {
	// Unit is "s", "{token}/s" or "{token}".
	Unit string `json:"unit"`
	// Count is how many requests observed the metric.
	Count int64 `json:"count"`
	// Quantiles maps "p50" and the like to values; p5 only for output
	// tokens/s.
	Quantiles map[string]float64 `json:"-"`
}

// MarshalJSON writes the quantiles as keys beside unit and count, in
// ascending order.
func (s Summary) MarshalJSON() ([]byte, error) {
	b := []byte(`{"unit":`)
	b = strconv.AppendQuote(b, s.Unit)
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, s.Count, 10)
	for _, q := range []float64{0.05, 0.5, 0.9, 0.95, 0.99} {
		name := QuantileName(q)
		if v, ok := s.Quantiles[name]; ok {
			b = append(b, `,"`...)
			b = append(b, name...)
			b = append(b, `":`...)
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Summary) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*s = Summary{}
	for k, v := range raw {
		var err error
		switch k {
		case "unit":
			err = json.Unmarshal(v, &s.Unit)
		case "count":
			err = json.Unmarshal(v, &s.Count)
		default:
			var f float64
			if err = json.Unmarshal(v, &f); err == nil {
				if s.Quantiles == nil {
					s.Quantiles = map[string]float64{}
				}
				s.Quantiles[k] = f
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Report renders the aggregate as the comparison table, generated at at.
func (a *Aggregate) Report(at time.Time) *Report {
	rep := &Report{
		Version:       ReportVersion,
		Window:        a.window.String(),
		WindowSeconds: int(a.window.Duration() / time.Second),
		GeneratedAt:   at.UTC(),
		Rows:          []ReportRow{},
		Live:          append([]LiveRow{}, a.live...),
	}
	for _, r := range a.sortedRows() {
		rr := ReportRow{
			RowID:          rowID(r),
			Requests:       r.Counts.Requests,
			Errors:         r.Counts.Errors,
			Aborts:         r.Counts.Aborts,
			Buffered:       r.Counts.Buffered,
			Throttled:      r.Counts.Throttled,
			ErrorRate:      ratio(r.Counts.Errors, r.Counts.Requests),
			AbortRate:      ratio(r.Counts.Aborts, r.Counts.Requests),
			ThrottledRate:  ratio(r.Counts.Throttled, r.Counts.Requests),
			EstimatedShare: ratio(r.Counts.Estimated, r.Counts.Requests),
			CostUSD:        round(r.Counts.CostUSD),
			SLO:            sloSummary(&r.Counts, a.window.Duration().Seconds()),
			UsageCheck:     usageCheckSummary(&r.Counts),
		}
		summarize(&rr.Metrics, &r.sketches)
		rr.ByInflight = inflightPoints(r)
		if r.HasHealth {
			rr.Health = healthReport(&r.Health)
		}
		rr.RateLimit = rateLimitReport(&r.Headroom)
		for i := range r.Series {
			sl := &r.Series[i]
			p := SeriesPoint{
				Start:    sl.Start.UTC(),
				Seconds:  int(a.window.Slice() / time.Second),
				Requests: sl.Counts.Requests,
				Errors:   sl.Counts.Errors,
			}
			summarize(&p.Metrics, &sl.sketches)
			rr.Series = append(rr.Series, p)
		}
		rep.Rows = append(rep.Rows, rr)
	}
	return rep
}

// summarize fills each metric's Summary from its sketch.
func summarize(into *ReportMetrics, sks *[NumMetrics]*ddsketch.DDSketch) {
	for m := Metric(0); int(m) < NumMetrics; m++ {
		summarizeOne(into.Get(m), m, sks[m])
	}
}

// summarizeOne fills metric m's Summary from its sketch sk (nil: none).
func summarizeOne(s *Summary, m Metric, sk *ddsketch.DDSketch) {
	s.Unit, s.Count = m.Unit(), sketchCount(sk)
	if s.Count == 0 {
		return
	}
	s.Quantiles = map[string]float64{}
	for _, q := range m.Quantiles() {
		if v, err := sk.GetValueAtQuantile(q); err == nil {
			s.Quantiles[QuantileName(q)] = round(v)
		}
	}
}

func ratio(n, d int64) float64 {
	if d == 0 {
		return 0
	}
	return round(float64(n) / float64(d))
}

// round keeps 6 significant digits: the sketches are accurate to 1 %, so
// more digits are noise that only makes the JSON harder to read.
func round(v float64) float64 {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return v
	}
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return r
}
