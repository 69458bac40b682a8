package stats

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
)

// The fair comparison of two sets of rows, A and B. Side by side, two
// rows' quantiles differ by the model and by what each model was given:
// one may have served the long prompts, or the peak. Comparing within
// cells of (in-flight level x input size) (strata.go) takes those two out:
//
//   - per cell and side, the quantile and a distribution-free 95 %
//     interval for it, the order statistics at ranks n*q -/+
//     1.96*sqrt(n*q*(1-q)) (the binomial rank interval), read off the
//     cell's sketch and widened by its relative accuracy; the interval's
//     width in logs over 2*1.96 is the log quantile's standard error;
//   - per cell, the log of B's quantile over A's, with the two variances
//     added;
//   - over the cells both sides have at least MinRequests(q) requests in,
//     the mean of the log ratios weighted by the harmonic mean of the two
//     counts, with the variance of that mean, and exp of the mean and of
//     mean -/+ 1.96 standard errors.
//
// The weights are fixed by the counts, not by the estimates, so the
// figure answers one question whatever the data: the ratio on the
// conditions both sides saw, each cell weighing as much as the requests it
// can compare. docs/live-stats.md, "Comparing two models fairly", states
// what is and is not controlled.

// CompareVersion is the version of the Comparison JSON
// (GET /tokentap/stats/compare, `tokentap stats --compare --json`).
const CompareVersion = 1

// z95 is the standard normal quantile of a two-sided 95 % interval.
const z95 = 1.959963984540054

// minCellRequests is the fewest requests of each side a cell needs to
// count, at any quantile: below it the rank interval of the median spans
// more than a third of the cell's requests, and the normal approximation
// of the combined figure leans on cells too small to bear it.
const minCellRequests = 20

// compareQuantiles are the quantiles compared.
var compareQuantiles = [...]float64{0.5, 0.95}

// MinRequests is the fewest requests each side needs in a cell for its
// quantile q to be compared there: minCellRequests, or more where the rank
// interval's upper end would fall past the cell's largest request (110
// for p95), since an interval that runs off the data is no interval.
func MinRequests(q float64) int64 {
	for n := int64(minCellRequests); ; n++ {
		lo, hi := rankInterval(n, q)
		if lo >= 0 && hi <= n-1 {
			return n
		}
	}
}

// rankInterval is the binomial rank interval of quantile q among n
// values, as 0-based ranks, not clamped.
func rankInterval(n int64, q float64) (lo, hi int64) {
	c := float64(n) * q
	s := z95 * math.Sqrt(float64(n)*q*(1-q))
	return int64(math.Floor(c - s)), int64(math.Ceil(c + s))
}

// Selector picks the rows of one side of a comparison. Its text is
// comma-separated terms, all of which a row must match:
//
//	model=<name>         the row's model
//	provider=<name>      the row's provider
//	label:<name>=<value> the row's label <name>
//	<name>               short for model=<name>
//
// e.g. "model=gpt-4o", "provider=openai,model=gpt-4o",
// "label:route=/v1/chat". Names cannot hold a comma. The overflow row,
// whose requests are of many keys, matches no selector.
type Selector struct {
	text            string
	provider, model string
	labels          []Label
}

// ParseSelector reads a selector's text.
func ParseSelector(s string) (Selector, error) {
	sel := Selector{text: s}
	if strings.TrimSpace(s) == "" {
		return sel, errors.New("empty selector: use model=<name>, provider=<name> or label:<name>=<value>, comma-separated")
	}
	seen := map[string]bool{}
	for _, term := range strings.Split(s, ",") {
		term = strings.TrimSpace(term)
		name, value, ok := strings.Cut(term, "=")
		if !ok {
			name, value = "model", term
		}
		if value == "" || name == "" {
			return sel, fmt.Errorf("selector %q: term %q has no value", s, term)
		}
		if seen[name] {
			return sel, fmt.Errorf("selector %q: %s given twice", s, name)
		}
		seen[name] = true
		switch {
		case name == "model":
			sel.model = value
		case name == "provider":
			sel.provider = value
		case strings.HasPrefix(name, "label:") && len(name) > len("label:"):
			sel.labels = append(sel.labels, Label{strings.TrimPrefix(name, "label:"), value})
		default:
			return sel, fmt.Errorf("selector %q: unknown term %q: use model=, provider= or label:<name>=", s, name)
		}
	}
	return sel, nil
}

// String returns the selector's text.
func (s Selector) String() string { return s.text }

func (s *Selector) matches(r *AggregateRow) bool {
	if r.Overflow || (s.model != "" && r.Key.Model != s.model) || (s.provider != "" && r.Key.Provider != s.provider) {
		return false
	}
	for _, want := range s.labels {
		found := false
		for _, l := range r.Key.Labels {
			if l.Name == want.Name && l.Value == want.Value {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// Comparison is the fair comparison of two sides, the JSON of
// GET /tokentap/stats/compare. Every ratio is B's quantile over A's: for
// time to first token below 1 means B is faster, for output tokens/s
// above 1 does.
type Comparison struct {
	// Version is CompareVersion.
	Version int `json:"version"`
	// Window is the window compared; WindowSeconds the same in seconds.
	// The cells cover its last half to whole (strata.go).
	Window        string    `json:"window"`
	WindowSeconds int       `json:"window_seconds"`
	GeneratedAt   time.Time `json:"generated_at"`
	// Ratio is "b/a", the direction of every ratio.
	Ratio string `json:"ratio"`
	// A and B are the sides.
	A CompareSide `json:"a"`
	B CompareSide `json:"b"`
	// Metrics are the comparisons, per metric and quantile.
	Metrics []CompareMetric `json:"metrics"`
	// Cells are the cells either side has a request in, when asked for.
	Cells []CompareCell `json:"cells,omitempty"`
}

// CompareSide is one side's rows and requests.
type CompareSide struct {
	Selector string  `json:"selector"`
	Rows     []RowID `json:"rows"`
	// Requests counts the rows' requests in the window; Stratified those
	// with a cell (a known in-flight level and input size) over the
	// cells' span.
	Requests   int64 `json:"requests"`
	Stratified int64 `json:"stratified"`
}

// Interval is a ratio with its 95 % interval.
type Interval struct {
	Ratio float64 `json:"ratio"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
}

// CompareMetric is one metric's quantile compared.
type CompareMetric struct {
	Metric   string `json:"metric"`
	Quantile string `json:"quantile"`
	// MinRequests is what each side needs in a cell for it to count.
	MinRequests int64 `json:"min_requests"`
	// Fair is the ratio within cells; absent when NotComparable says why.
	Fair          *Interval `json:"fair,omitempty"`
	NotComparable string    `json:"not_comparable,omitempty"`
	// Naive is the ratio of the whole rows' quantiles, as the table shows
	// them side by side; absent when a side has none.
	Naive *float64 `json:"naive,omitempty"`
	// Cells counts the cells compared; SharedA and SharedB are each side's
	// requests in them, CoverageA and CoverageB the shares of each side's
	// stratified requests (of this metric) they are.
	Cells     int     `json:"cells"`
	SharedA   int64   `json:"shared_a"`
	SharedB   int64   `json:"shared_b"`
	CoverageA float64 `json:"coverage_a"`
	CoverageB float64 `json:"coverage_b"`
}

// CompareCell is one cell of the comparison.
type CompareCell struct {
	InflightMin int64 `json:"inflight_min"`
	InflightMax int64 `json:"inflight_max,omitempty"`
	InputMin    int64 `json:"input_min"`
	InputMax    int64 `json:"input_max,omitempty"`
	RequestsA   int64 `json:"requests_a"`
	RequestsB   int64 `json:"requests_b"`
	// Metrics are the cell's quantiles per metric.
	Metrics []CellMetric `json:"metrics"`
}

// CellMetric is one metric's quantile in one cell: each side's value
// where it has requests, and the ratio where the cell counts.
type CellMetric struct {
	Metric   string  `json:"metric"`
	Quantile string  `json:"quantile"`
	CountA   int64   `json:"count_a"`
	CountB   int64   `json:"count_b"`
	A        float64 `json:"a,omitempty"`
	B        float64 `json:"b,omitempty"`
	// Ratio is absent where the cell does not count; Weight is its share
	// of the fair figure.
	Ratio  *Interval `json:"ratio,omitempty"`
	Weight float64   `json:"weight,omitempty"`
}

// side is one side's rows merged.
type side struct {
	rows     []RowID
	requests int64
	sketches [NumMetrics]*ddsketch.DDSketch
	strata   aggStrata
}

// gather merges the rows sel matches.
func (a *Aggregate) gather(sel *Selector) *side {
	s := &side{}
	for _, r := range a.sortedRows() {
		if !sel.matches(r) {
			continue
		}
		s.rows = append(s.rows, rowID(r))
		s.requests += r.Counts.Requests
		mergeSketches(s.sketches[:], r.sketches[:], newViewSketch)
		if r.strata != nil {
			for c := range r.strata {
				s.strata[c].requests += r.strata[c].requests
				mergeSketches(s.strata[c].sketches[:], r.strata[c].sketches[:], newStrataViewSketch)
			}
		}
	}
	return s
}

func (s *side) stratified() int64 {
	var n int64
	for c := range s.strata {
		n += s.strata[c].requests
	}
	return n
}

// Compare compares the rows b selects with those a selects, in the
// aggregate's window, at at; cells adds the per-cell table. It is an
// error for a window without strata, for a side that matches no row, and
// for a row that both match.
func (a *Aggregate) Compare(sa, sb Selector, cells bool, at time.Time) (*Comparison, error) {
	if !a.window.HasStrata() {
		return nil, fmt.Errorf("window %s keeps no strata: compare in 5m or 1h", a.window)
	}
	A, B := a.gather(&sa), a.gather(&sb)
	for _, s := range []struct {
		name string
		sel  Selector
		side *side
	}{{"A", sa, A}, {"B", sb, B}} {
		if len(s.side.rows) == 0 {
			return nil, fmt.Errorf("%s (%s): no row in the last %s", s.name, s.sel, a.window)
		}
	}
	for _, ra := range A.rows {
		for _, rb := range B.rows {
			if ra.Provider == rb.Provider && ra.Model == rb.Model && equalLabels(ra.Labels, rb.Labels) {
				return nil, fmt.Errorf("row %s/%s is in both A (%s) and B (%s)", ra.Provider, ra.Model, sa, sb)
			}
		}
	}
	cmp := &Comparison{
		Version:       CompareVersion,
		Window:        a.window.String(),
		WindowSeconds: int(a.window.Duration() / time.Second),
		GeneratedAt:   at.UTC(),
		Ratio:         "b/a",
		A:             CompareSide{Selector: sa.String(), Rows: A.rows, Requests: A.requests, Stratified: A.stratified()},
		B:             CompareSide{Selector: sb.String(), Rows: B.rows, Requests: B.requests, Stratified: B.stratified()},
	}
	var perCell [numCells][]CellMetric
	for i, m := range inflightMetrics {
		for _, q := range compareQuantiles {
			cm, cellMetrics := compareMetric(A, B, i, m, q)
			cmp.Metrics = append(cmp.Metrics, cm)
			for c := range perCell {
				perCell[c] = append(perCell[c], cellMetrics[c])
			}
		}
	}
	if cells {
		cmp.Cells = []CompareCell{}
		for c := range perCell {
			if A.strata[c].requests == 0 && B.strata[c].requests == 0 {
				continue
			}
			cc := CompareCell{RequestsA: A.strata[c].requests, RequestsB: B.strata[c].requests, Metrics: perCell[c]}
			cc.InflightMin, cc.InflightMax = InflightRange(c / numInputBuckets)
			cc.InputMin, cc.InputMax = InputRange(c % numInputBuckets)
			cmp.Cells = append(cmp.Cells, cc)
		}
	}
	return cmp, nil
}

func equalLabels(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// cellEstimate is one side's quantile in one cell: its log and the log's
// standard error.
type cellEstimate struct {
	value, log, se float64
	ok             bool
}

// estimate reads quantile q of sk, n values of relative accuracy alpha,
// with the standard error of its log from the binomial rank interval.
func estimate(sk *ddsketch.DDSketch, n int64, q, alpha float64) cellEstimate {
	if sk == nil || n < 1 {
		return cellEstimate{}
	}
	at := func(rank int64) float64 {
		rank = min(max(rank, 0), n-1)
		if n == 1 {
			return mustQuantile(sk, 0)
		}
		// Half a rank up, so that float rounding cannot drop to the
		// rank below (the sketch takes the first bin whose cumulative
		// count exceeds q*(n-1)).
		return mustQuantile(sk, min((float64(rank)+0.5)/float64(n-1), 1))
	}
	v := mustQuantile(sk, q)
	lo, hi := rankInterval(n, q)
	vlo, vhi := at(lo)/(1+alpha), at(hi)/(1-alpha)
	if !(v > 0 && vlo > 0) {
		// A zero has no log: such a cell cannot give a ratio.
		return cellEstimate{value: v}
	}
	return cellEstimate{value: v, log: math.Log(v), se: (math.Log(vhi) - math.Log(vlo)) / (2 * z95), ok: true}
}

func mustQuantile(sk *ddsketch.DDSketch, q float64) float64 {
	v, err := sk.GetValueAtQuantile(q)
	if err != nil {
		return 0
	}
	return v
}

// compareMetric compares metric m (the i-th strata metric) at quantile q,
// and returns each cell's part.
func compareMetric(A, B *side, i int, m Metric, q float64) (CompareMetric, [numCells]CellMetric) {
	nmin := MinRequests(q)
	cm := CompareMetric{Metric: m.String(), Quantile: QuantileName(q), MinRequests: nmin}
	var cells [numCells]CellMetric
	var totalA, totalB int64
	var sumW, sumWD, sumW2V float64
	type used struct {
		c int
		w float64
	}
	var usedCells []used
	for c := range cells {
		ska, skb := A.strata[c].sketches[i], B.strata[c].sketches[i]
		na, nb := sketchCount(ska), sketchCount(skb)
		totalA += na
		totalB += nb
		cell := CellMetric{Metric: cm.Metric, Quantile: cm.Quantile, CountA: na, CountB: nb}
		ea, eb := estimate(ska, na, q, StrataAccuracy), estimate(skb, nb, q, StrataAccuracy)
		cell.A, cell.B = round(ea.value), round(eb.value)
		if na >= nmin && nb >= nmin && ea.ok && eb.ok {
			d := eb.log - ea.log
			v := ea.se*ea.se + eb.se*eb.se
			w := 2 * float64(na) * float64(nb) / float64(na+nb)
			sumW += w
			sumWD += w * d
			sumW2V += w * w * v
			sd := math.Sqrt(v)
			cell.Ratio = &Interval{round(math.Exp(d)), round(math.Exp(d - z95*sd)), round(math.Exp(d + z95*sd))}
			usedCells = append(usedCells, used{c, w})
			cm.Cells++
			cm.SharedA += na
			cm.SharedB += nb
		}
		cells[c] = cell
	}
	for _, u := range usedCells {
		cells[u.c].Weight = round(u.w / sumW)
	}
	if qa, qb := quantileOf(A.sketches[m], q), quantileOf(B.sketches[m], q); qa > 0 && qb > 0 {
		naive := round(qb / qa)
		cm.Naive = &naive
	}
	cm.CoverageA, cm.CoverageB = ratio(cm.SharedA, totalA), ratio(cm.SharedB, totalB)
	if cm.Cells == 0 {
		cm.NotComparable = whyNotComparable(A, B, i, nmin, totalA, totalB)
		return cm, cells
	}
	d := sumWD / sumW
	sd := math.Sqrt(sumW2V) / sumW
	cm.Fair = &Interval{round(math.Exp(d)), round(math.Exp(d - z95*sd)), round(math.Exp(d + z95*sd))}
	return cm, cells
}

func quantileOf(sk *ddsketch.DDSketch, q float64) float64 {
	if sk == nil || sk.IsEmpty() {
		return 0
	}
	return mustQuantile(sk, q)
}

// whyNotComparable says why no cell counts for the i-th strata metric:
// too few requests on a side, no shared load, no shared input size, no
// shared cell, or too few requests in the shared cells.
func whyNotComparable(A, B *side, i int, nmin, totalA, totalB int64) string {
	if totalA < nmin || totalB < nmin {
		return fmt.Sprintf("too few requests (A: %d, B: %d; a cell needs %d of each)", totalA, totalB, nmin)
	}
	var loadA, loadB [numInflightBuckets]bool
	var inputA, inputB [numInputBuckets]bool
	var sharedA, sharedB int64
	for c := range A.strata {
		na, nb := sketchCount(A.strata[c].sketches[i]), sketchCount(B.strata[c].sketches[i])
		ib, nb2 := c/numInputBuckets, c%numInputBuckets
		loadA[ib] = loadA[ib] || na > 0
		loadB[ib] = loadB[ib] || nb > 0
		inputA[nb2] = inputA[nb2] || na > 0
		inputB[nb2] = inputB[nb2] || nb > 0
		if na > 0 && nb > 0 {
			sharedA += na
			sharedB += nb
		}
	}
	overlap := func(a, b []bool) bool {
		for j := range a {
			if a[j] && b[j] {
				return true
			}
		}
		return false
	}
	switch {
	case !overlap(loadA[:], loadB[:]):
		return "no overlap in load"
	case !overlap(inputA[:], inputB[:]):
		return "no overlap in input size"
	case sharedA == 0:
		return "no cell of in-flight level and input size has requests of both"
	}
	return fmt.Sprintf("too few requests in shared cells (A: %d, B: %d; a cell needs %d of each)", sharedA, sharedB, nmin)
}
