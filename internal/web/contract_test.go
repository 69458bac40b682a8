package web_test

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

// The stats document the page reads (GET /tokentap/stats, version 1), as the
// tests write and read it. The page is written against the same contract;
// the end-to-end test reads the real API with these types too.

type statsDoc struct {
	Version       int         `json:"version"`
	Window        string      `json:"window"`
	WindowSeconds int         `json:"window_seconds"`
	GeneratedAt   string      `json:"generated_at"`
	Rows          []statsRow  `json:"rows"`
	Live          []statsLive `json:"live"`
}

// statsLive is one provider and model's requests in flight.
type statsLive struct {
	Provider  string `json:"provider"`
	Model     string `json:"model"`
	InFlight  int64  `json:"in_flight"`
	Waiting   int64  `json:"waiting"`
	Receiving int64  `json:"receiving"`
	Stalled   int64  `json:"stalled"`
}

type statsRow struct {
	Provider       string                 `json:"provider"`
	Model          string                 `json:"model"`
	Labels         map[string]string      `json:"labels"`
	Overflow       bool                   `json:"overflow"`
	Requests       int64                  `json:"requests"`
	Errors         int64                  `json:"errors"`
	Aborts         int64                  `json:"aborts"`
	ErrorRate      float64                `json:"error_rate"`
	AbortRate      float64                `json:"abort_rate"`
	Throttled      int64                  `json:"throttled"`
	ThrottledRate  float64                `json:"throttled_rate"`
	RateLimit      *statsRateLimit        `json:"rate_limit,omitempty"`
	EstimatedShare float64                `json:"estimated_share"`
	Buffered       int64                  `json:"buffered"`
	CostUSD        float64                `json:"cost_usd"`
	SLO            *statsSLO              `json:"slo,omitempty"`
	UsageCheck     *statsUsageCheck       `json:"usage_check,omitempty"`
	Health         *statsHealth           `json:"health,omitempty"`
	Metrics        map[string]statsMetric `json:"metrics"`
	Series         []statsPoint           `json:"series,omitempty"`
	ByInflight     []statsInflight        `json:"by_inflight,omitempty"`
}

// statsUsageCheck is a row's verify_usage counts.
type statsUsageCheck struct {
	Verified       int64   `json:"verified"`
	Mismatches     int64   `json:"mismatches"`
	ReportedTokens int64   `json:"reported_tokens"`
	CountedTokens  int64   `json:"counted_tokens"`
	Ratio          float64 `json:"ratio"`
}

// statsInflight is one in-flight bucket of a row; InflightMax is absent
// for the open-ended last.
type statsInflight struct {
	InflightMin int64                  `json:"inflight_min"`
	InflightMax int64                  `json:"inflight_max,omitempty"`
	Requests    int64                  `json:"requests"`
	Metrics     map[string]statsMetric `json:"metrics"`
}

// statsPoint is one time slice of a row's series (series=true).
type statsPoint struct {
	Start    string                 `json:"start"`
	Seconds  int                    `json:"seconds"`
	Requests int64                  `json:"requests"`
	Errors   int64                  `json:"errors"`
	Metrics  map[string]statsMetric `json:"metrics"`
}

// statsHealth is a row's health: whether it is slower than its own
// earlier requests.
type statsHealth struct {
	State    string             `json:"state"`
	Since    string             `json:"since"`
	Reason   string             `json:"reason"`
	Baseline map[string]float64 `json:"baseline"`
	Current  map[string]float64 `json:"current"`
}

// statsRateLimit is a row's latest rate limit report; each limit and
// value absent when unknown.
type statsRateLimit struct {
	ObservedAt        string              `json:"observed_at"`
	Requests          *statsRateLimitKind `json:"requests,omitempty"`
	Tokens            *statsRateLimitKind `json:"tokens,omitempty"`
	RetryAfterSeconds *float64            `json:"retry_after_seconds,omitempty"`
}

type statsRateLimitKind struct {
	RemainingShare *float64 `json:"remaining_share,omitempty"`
	Remaining      *int64   `json:"remaining,omitempty"`
	ResetSeconds   *float64 `json:"reset_seconds,omitempty"`
}

// statsSLO is a row's attainment of its objective; absent when no
// objective judged a request of the row.
type statsSLO struct {
	Requests     int64   `json:"requests"`
	Met          int64   `json:"met"`
	Attainment   float64 `json:"attainment"`
	TokenGoodput float64 `json:"token_goodput"`
}

// statsMetric has no quantiles when Count is 0.
type statsMetric struct {
	Unit  string   `json:"unit"`
	Count int64    `json:"count"`
	P5    *float64 `json:"p5,omitempty"`
	P50   *float64 `json:"p50,omitempty"`
	P90   *float64 `json:"p90,omitempty"`
	P95   *float64 `json:"p95,omitempty"`
	P99   *float64 `json:"p99,omitempty"`
}

// The comparison the page reads (GET /tokentap/stats/compare, version 1):
// every ratio is B's quantile over A's. TestCompareContract holds these
// types to stats.Comparison.

type compareDoc struct {
	Version       int             `json:"version"`
	Window        string          `json:"window"`
	WindowSeconds int             `json:"window_seconds"`
	GeneratedAt   string          `json:"generated_at"`
	Ratio         string          `json:"ratio"`
	A             compareSide     `json:"a"`
	B             compareSide     `json:"b"`
	Metrics       []compareMetric `json:"metrics"`
	Cells         []compareCell   `json:"cells,omitempty"`
}

// compareSide is one side's selector, the rows it matched and their
// requests, all and those with a cell.
type compareSide struct {
	Selector   string         `json:"selector"`
	Rows       []compareRowID `json:"rows"`
	Requests   int64          `json:"requests"`
	Stratified int64          `json:"stratified"`
}

type compareRowID struct {
	Provider string            `json:"provider"`
	Model    string            `json:"model"`
	Labels   map[string]string `json:"labels"`
	Overflow bool              `json:"overflow"`
}

// compareInterval is a ratio with its 95 % interval.
type compareInterval struct {
	Ratio float64 `json:"ratio"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
}

// compareMetric is one metric's quantile compared: Fair is absent when
// NotComparable says why, Naive when a side has no value.
type compareMetric struct {
	Metric        string           `json:"metric"`
	Quantile      string           `json:"quantile"`
	MinRequests   int64            `json:"min_requests"`
	Fair          *compareInterval `json:"fair,omitempty"`
	NotComparable string           `json:"not_comparable,omitempty"`
	Naive         *float64         `json:"naive,omitempty"`
	Cells         int              `json:"cells"`
	SharedA       int64            `json:"shared_a"`
	SharedB       int64            `json:"shared_b"`
	CoverageA     float64          `json:"coverage_a"`
	CoverageB     float64          `json:"coverage_b"`
}

// compareCell is one cell of (in-flight level x input size); the Max
// fields are absent for the open-ended last bucket.
type compareCell struct {
	InflightMin int64               `json:"inflight_min"`
	InflightMax int64               `json:"inflight_max,omitempty"`
	InputMin    int64               `json:"input_min"`
	InputMax    int64               `json:"input_max,omitempty"`
	RequestsA   int64               `json:"requests_a"`
	RequestsB   int64               `json:"requests_b"`
	Metrics     []compareCellMetric `json:"metrics"`
}

// compareCellMetric is one metric's quantile in a cell: Ratio is absent
// where the cell does not count.
type compareCellMetric struct {
	Metric   string           `json:"metric"`
	Quantile string           `json:"quantile"`
	CountA   int64            `json:"count_a"`
	CountB   int64            `json:"count_b"`
	A        float64          `json:"a,omitempty"`
	B        float64          `json:"b,omitempty"`
	Ratio    *compareInterval `json:"ratio,omitempty"`
	Weight   float64          `json:"weight,omitempty"`
}

// metric finds one metric's quantile.
func (d compareDoc) metric(name, q string) (compareMetric, bool) {
	for _, m := range d.Metrics {
		if m.Metric == name && m.Quantile == q {
			return m, true
		}
	}
	return compareMetric{}, false
}

func readCompareFixture(t *testing.T, name string) compareDoc {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var d compareDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

func readFixture(t *testing.T, name string) statsDoc {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var d statsDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

// clone deep-copies a document, so a test can derive one from another.
func (d statsDoc) clone() statsDoc {
	b, err := json.Marshal(d)
	if err != nil {
		panic(err)
	}
	var c statsDoc
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return c
}

// labelText is the canonical form of a row's labels, as the page writes it
// into data-labels: name=value pairs sorted by name, joined by ", ".
func labelText(labels map[string]string) string {
	parts := make([]string, 0, len(labels))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ", ")
}

// rowName names a row as models() names a rendered one.
func rowName(r statsRow) string {
	if l := labelText(r.Labels); l != "" {
		return r.Model + " {" + l + "}"
	}
	return r.Model
}

// quantile reads one quantile of one metric; ok is false when the metric
// has no values or the API sent no such quantile.
func (r statsRow) quantile(metric, q string) (float64, bool) {
	m, ok := r.Metrics[metric]
	if !ok || m.Count == 0 {
		return 0, false
	}
	p := map[string]*float64{"p5": m.P5, "p50": m.P50, "p90": m.P90, "p95": m.P95, "p99": m.P99}[q]
	if p == nil {
		return 0, false
	}
	return *p, true
}

// orderBy is the order the page must show: by the value, rows without one
// last whatever the direction, ties by provider, model and labels.
func orderBy(rows []statsRow, value func(statsRow) (float64, bool), desc bool) []string {
	rs := slices.Clone(rows)
	key := func(r statsRow) string { return r.Provider + "\x00" + r.Model + "\x00" + labelText(r.Labels) }
	slices.SortStableFunc(rs, func(a, b statsRow) int {
		av, aok := value(a)
		bv, bok := value(b)
		if aok != bok {
			if aok {
				return -1
			}
			return 1
		}
		if aok && av != bv {
			if (av < bv) != desc {
				return -1
			}
			return 1
		}
		return strings.Compare(key(a), key(b))
	})
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = rowName(r)
	}
	return out
}

func byQuantile(metric, q string) func(statsRow) (float64, bool) {
	return func(r statsRow) (float64, bool) { return r.quantile(metric, q) }
}
