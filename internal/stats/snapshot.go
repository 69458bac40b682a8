package stats

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
)

// SnapshotVersion is the version of the Snapshot JSON
// (GET /tokentap/stats/sketches). A reader refuses other versions rather
// than misread them.
const SnapshotVersion = 1

// Snapshot is the raw, mergeable state of one window: per row, the counts
// and each metric's sketch in sketches-go's protobuf form, base64-encoded.
type Snapshot struct {
	// Version is SnapshotVersion.
	Version int `json:"version"`
	// Window is "1m", "5m" or "1h"; WindowSeconds the same in seconds.
	Window        string `json:"window"`
	WindowSeconds int    `json:"window_seconds"`
	// GeneratedAt is when the state was taken.
	GeneratedAt time.Time `json:"generated_at"`
	// RelativeAccuracy is the sketches' accuracy, for readers' information;
	// each sketch also carries its index mapping.
	RelativeAccuracy float64 `json:"relative_accuracy"`
	// Rows are sorted like the Report's.
	Rows []SnapshotRow `json:"rows"`
	// Live is the requests in flight when the state was taken, as in the
	// Report; absent from documents of instances that keep none.
	Live []LiveRow `json:"live,omitempty"`
}

// SnapshotRow is one row's state.
type SnapshotRow struct {
	RowID
	SnapshotCounts

	// Sketches maps a metric's name (as in the Report) to its sketch:
	// base64 of the sketches-go DDSketch protobuf. Metrics no request
	// observed are absent.
	Sketches map[string]string `json:"sketches"`

	// Health is as in the Report.
	Health *HealthReport `json:"health,omitempty"`
	// RateLimit is as in the Report; absent in snapshots from a tokentap
	// that did not read it.
	RateLimit *RateLimitReport `json:"rate_limit,omitempty"`

	// ByInflight is the row's in-flight view: per bucket with a request,
	// its lowest level, requests and sketches (of InflightAccuracy).
	ByInflight []SnapshotInflight `json:"by_inflight,omitempty"`

	// Strata is the row's cells of (in-flight level x input size), each
	// with a request, for the fair comparison (strata.go); absent in
	// windows without strata and in snapshots of older tokentaps.
	Strata []SnapshotCell `json:"strata,omitempty"`

	// Series is the row's time slices, oldest first, every slice of the
	// window, when the snapshot was asked for with series.
	Series []SnapshotSlice `json:"series,omitempty"`
}

// SnapshotSlice is one time slice of a row's series: its start, its
// length, and its counts and sketches as a row's.
type SnapshotSlice struct {
	Start   time.Time `json:"start"`
	Seconds int       `json:"seconds"`
	SnapshotCounts
	Sketches map[string]string `json:"sketches"`
}

// SnapshotInflight is one in-flight bucket of a row.
type SnapshotInflight struct {
	InflightMin int64             `json:"inflight_min"`
	Requests    int64             `json:"requests"`
	Sketches    map[string]string `json:"sketches"`
}

// SnapshotCell is one cell of a row's strata: its in-flight bucket's and
// input bucket's lowest values, its requests and its sketches (of
// StrataAccuracy).
type SnapshotCell struct {
	InflightMin int64             `json:"inflight_min"`
	InputMin    int64             `json:"input_min"`
	Requests    int64             `json:"requests"`
	Sketches    map[string]string `json:"sketches"`
}

// SnapshotCounts are a row's or a slice's counts.
type SnapshotCounts struct {
	// Requests, Errors and Aborts are as in the Report; Estimated counts
	// the requests whose token counts were estimated.
	Requests  int64 `json:"requests"`
	Errors    int64 `json:"errors"`
	Aborts    int64 `json:"aborts"`
	Estimated int64 `json:"estimated"`
	// Throttled is as in the Report; absent (0) in snapshots from a
	// tokentap that did not count it.
	Throttled int64 `json:"throttled"`
	// CostUSD is as in the Report; absent (0) in snapshots from a
	// tokentap without costs.
	CostUSD float64 `json:"cost_usd"`
	// SLORequests, SLOMet and GoodputTokens are the counts behind the
	// Report's slo: requests judged, requests that met their objective
	// and those requests' output tokens.
	SLORequests   int64 `json:"slo_requests"`
	SLOMet        int64 `json:"slo_met"`
	GoodputTokens int64 `json:"goodput_tokens"`
	// Buffered counts the streams that arrived held back and released in
	// one burst; absent (0) in snapshots from a tokentap without it.
	Buffered int64 `json:"buffered,omitempty"`
	// UsageVerified, UsageReportedTokens, UsageCountedTokens and
	// UsageMismatches are the counts behind the Report's usage_check;
	// absent when no request was verified, and in snapshots from a
	// tokentap without verify_usage.
	UsageVerified       int64 `json:"usage_verified,omitempty"`
	UsageReportedTokens int64 `json:"usage_reported_tokens,omitempty"`
	UsageCountedTokens  int64 `json:"usage_counted_tokens,omitempty"`
	UsageMismatches     int64 `json:"usage_mismatches,omitempty"`
}

func snapshotCounts(c *Counts) SnapshotCounts {
	return SnapshotCounts{
		Requests: c.Requests, Errors: c.Errors, Aborts: c.Aborts, Estimated: c.Estimated, Throttled: c.Throttled, CostUSD: c.CostUSD,
		SLORequests: c.SLORequests, SLOMet: c.SLOMet, GoodputTokens: c.GoodputTokens,
		Buffered:      c.Buffered,
		UsageVerified: c.UsageVerified, UsageReportedTokens: c.UsageReported, UsageCountedTokens: c.UsageCounted, UsageMismatches: c.UsageMismatches,
	}
}

// counts checks c, read from elsewhere, and returns it as Counts.
func (c *SnapshotCounts) counts() (Counts, error) {
	if c.Requests < 0 || c.Errors < 0 || c.Aborts < 0 || c.Estimated < 0 || c.Throttled < 0 ||
		c.SLORequests < 0 || c.SLOMet < 0 || c.GoodputTokens < 0 || c.Buffered < 0 {
		return Counts{}, fmt.Errorf("negative count")
	}
	if c.SLOMet > c.SLORequests {
		return Counts{}, fmt.Errorf("slo_met %d over slo_requests %d", c.SLOMet, c.SLORequests)
	}
	if c.UsageVerified < 0 || c.UsageReportedTokens < 0 || c.UsageCountedTokens < 0 || c.UsageMismatches < 0 {
		return Counts{}, fmt.Errorf("negative usage check count")
	}
	if c.UsageMismatches > c.UsageVerified {
		return Counts{}, fmt.Errorf("usage_mismatches %d over usage_verified %d", c.UsageMismatches, c.UsageVerified)
	}
	if !(c.CostUSD >= 0 && c.CostUSD <= maxValue) {
		return Counts{}, fmt.Errorf("cost_usd %v: want 0 to %g", c.CostUSD, float64(maxValue))
	}
	if c.Buffered > c.Requests {
		return Counts{}, fmt.Errorf("buffered %d over requests %d", c.Buffered, c.Requests)
	}
	return Counts{
		Requests: c.Requests, Errors: c.Errors, Aborts: c.Aborts, Estimated: c.Estimated, Throttled: c.Throttled, CostUSD: c.CostUSD,
		SLORequests: c.SLORequests, SLOMet: c.SLOMet, GoodputTokens: c.GoodputTokens,
		Buffered:      c.Buffered,
		UsageVerified: c.UsageVerified, UsageReported: c.UsageReportedTokens, UsageCounted: c.UsageCountedTokens, UsageMismatches: c.UsageMismatches,
	}, nil
}

// encodeSketches encodes each metric's sketch by the metric's name.
func encodeSketches(sks *[NumMetrics]*ddsketch.DDSketch) (map[string]string, error) {
	out := map[string]string{}
	for m, sk := range sks {
		if sk == nil || sk.IsEmpty() {
			continue
		}
		enc, err := encodeSketch(sk)
		if err != nil {
			return nil, fmt.Errorf("encoding %s: %v", Metric(m), err)
		}
		out[Metric(m).String()] = enc
	}
	return out, nil
}

// decodeSketches reads what encodeSketches wrote, skipping unknown metrics.
func decodeSketches(encoded map[string]string, into *[NumMetrics]*ddsketch.DDSketch) error {
	for name, enc := range encoded {
		m, ok := LookupMetric(name)
		if !ok || m.String() != name {
			continue
		}
		sk, err := decodeSketch(enc)
		if err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		into[m] = sk
	}
	return nil
}

// Snapshot exports the aggregate, taken at at.
func (a *Aggregate) Snapshot(at time.Time) (*Snapshot, error) {
	snap := &Snapshot{
		Version:          SnapshotVersion,
		Window:           a.window.String(),
		WindowSeconds:    int(a.window.Duration() / time.Second),
		GeneratedAt:      at.UTC(),
		RelativeAccuracy: RelativeAccuracy,
		Rows:             []SnapshotRow{},
	}
	for _, r := range a.sortedRows() {
		sr := SnapshotRow{RowID: rowID(r), SnapshotCounts: snapshotCounts(&r.Counts)}
		if r.HasHealth {
			sr.Health = healthReport(&r.Health)
		}
		sr.RateLimit = rateLimitReport(&r.Headroom)
		var err error
		if sr.Sketches, err = encodeSketches(&r.sketches); err != nil {
			return nil, fmt.Errorf("%s/%s: %v", r.Key.Provider, r.Key.Model, err)
		}
		for b := range r.inflight {
			agg := &r.inflight[b]
			if agg.requests == 0 {
				continue
			}
			si := SnapshotInflight{Requests: agg.requests, Sketches: map[string]string{}}
			si.InflightMin, _ = InflightRange(b)
			for i, m := range inflightMetrics {
				if sk := agg.sketches[i]; sk != nil && !sk.IsEmpty() {
					if si.Sketches[m.String()], err = encodeSketch(sk); err != nil {
						return nil, fmt.Errorf("%s/%s, in-flight %s: %v", r.Key.Provider, r.Key.Model, m, err)
					}
				}
			}
			sr.ByInflight = append(sr.ByInflight, si)
		}
		if sr.Strata, err = snapshotStrata(r.strata); err != nil {
			return nil, fmt.Errorf("%s/%s, %v", r.Key.Provider, r.Key.Model, err)
		}
		for i := range r.Series {
			sl := &r.Series[i]
			ss := SnapshotSlice{Start: sl.Start.UTC(), Seconds: int(a.window.Slice() / time.Second), SnapshotCounts: snapshotCounts(&sl.Counts)}
			if ss.Sketches, err = encodeSketches(&sl.sketches); err != nil {
				return nil, fmt.Errorf("%s/%s, slice %s: %v", r.Key.Provider, r.Key.Model, ss.Start.Format(time.RFC3339), err)
			}
			sr.Series = append(sr.Series, ss)
		}
		snap.Rows = append(snap.Rows, sr)
	}
	snap.Live = a.live
	return snap, nil
}

// ParseSnapshot reads the JSON of a Snapshot, checking its version.
func ParseSnapshot(b []byte) (*Snapshot, error) {
	var v struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("not a tokentap sketches document: %v", err)
	}
	if v.Version == nil {
		return nil, fmt.Errorf("not a tokentap sketches document: no version")
	}
	if *v.Version != SnapshotVersion {
		return nil, fmt.Errorf("sketches version %d: this tokentap reads version %d", *v.Version, SnapshotVersion)
	}
	var s Snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("reading sketches: %v", err)
	}
	return &s, nil
}

// Aggregate decodes the snapshot's sketches into an Aggregate that merges
// with others. Unknown metrics are skipped, so that a newer instance that
// adds one can still be read; malformed sketches are errors.
func (s *Snapshot) Aggregate() (*Aggregate, error) {
	if s.Version != SnapshotVersion {
		return nil, fmt.Errorf("sketches version %d: this tokentap reads version %d", s.Version, SnapshotVersion)
	}
	w, err := ParseWindow(s.Window)
	if err != nil {
		return nil, err
	}
	a := newAggregate(w)
	if err := readLive(s.Live); err != nil {
		return nil, err
	}
	a.mergeLive(s.Live)
	for i := range s.Rows {
		sr := &s.Rows[i]
		counts, err := sr.counts()
		if err != nil {
			return nil, fmt.Errorf("row %d (%s/%s): %v", i, sr.Provider, sr.Model, err)
		}
		r := &AggregateRow{
			Key:      Key{Provider: sr.Provider, Model: sr.Model},
			Overflow: sr.Overflow,
			Counts:   counts,
		}
		for name, value := range sr.Labels {
			r.Key.Labels = append(r.Key.Labels, Label{name, value})
		}
		sort.Slice(r.Key.Labels, func(i, j int) bool { return r.Key.Labels[i].Name < r.Key.Labels[j].Name })
		if err := decodeSketches(sr.Sketches, &r.sketches); err != nil {
			return nil, fmt.Errorf("row %d (%s/%s), %v", i, sr.Provider, sr.Model, err)
		}
		if sr.Health != nil {
			if r.Health, err = sr.Health.health(); err != nil {
				return nil, fmt.Errorf("row %d (%s/%s): %v", i, sr.Provider, sr.Model, err)
			}
			r.HasHealth = true
		}
		if sr.RateLimit != nil {
			if r.Headroom, err = sr.RateLimit.headroom(); err != nil {
				return nil, fmt.Errorf("row %d (%s/%s), rate_limit: %v", i, sr.Provider, sr.Model, err)
			}
		}
		if err := readInflight(sr.ByInflight, r); err != nil {
			return nil, fmt.Errorf("row %d (%s/%s), %v", i, sr.Provider, sr.Model, err)
		}
		if len(sr.Strata) > 0 && !w.HasStrata() {
			return nil, fmt.Errorf("row %d (%s/%s): strata in window %s, which keeps none", i, sr.Provider, sr.Model, w)
		}
		if r.strata, err = readStrata(sr.Strata); err != nil {
			return nil, fmt.Errorf("row %d (%s/%s), %v", i, sr.Provider, sr.Model, err)
		}
		if len(sr.Series) > 0 {
			if r.Series, err = s.series(sr, w); err != nil {
				return nil, fmt.Errorf("row %d (%s/%s), %v", i, sr.Provider, sr.Model, err)
			}
		}
		a.add(r)
	}
	return a, nil
}

// series reads a row's slices back: each checked, sorted by start, the
// slices of the window only (at most its slice count, so a document
// cannot make the reader allocate without bound).
func (s *Snapshot) series(sr *SnapshotRow, w Window) ([]SeriesSlice, error) {
	if len(sr.Series) > windows[w].count {
		return nil, fmt.Errorf("%d slices: window %s has %d", len(sr.Series), w, windows[w].count)
	}
	out := make([]SeriesSlice, len(sr.Series))
	for j := range sr.Series {
		ss := &sr.Series[j]
		if ss.Seconds != int(w.Slice()/time.Second) {
			return nil, fmt.Errorf("slice %d: %d seconds, want %s's %d", j, ss.Seconds, w, int(w.Slice()/time.Second))
		}
		c, err := ss.counts()
		if err != nil {
			return nil, fmt.Errorf("slice %d: %v", j, err)
		}
		out[j] = SeriesSlice{Start: ss.Start, Counts: c}
		if err := decodeSketches(ss.Sketches, &out[j].sketches); err != nil {
			return nil, fmt.Errorf("slice %d, %v", j, err)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Start.Before(out[b].Start) })
	return out, nil
}

// readInflight reads a row's in-flight buckets back into r, each checked:
// a known bucket's lowest level, at most once, a non-negative count and
// sketches of the in-flight kind.
func readInflight(in []SnapshotInflight, r *AggregateRow) error {
	var seen [numInflightBuckets]bool
	for _, si := range in {
		b := -1
		for c := range numInflightBuckets {
			if lo, _ := InflightRange(c); lo == si.InflightMin {
				b = c
			}
		}
		if b < 0 || seen[b] {
			return fmt.Errorf("in-flight bucket %d: not a bucket's lowest level, or given twice", si.InflightMin)
		}
		seen[b] = true
		if si.Requests < 0 {
			return fmt.Errorf("in-flight bucket %d: negative count", si.InflightMin)
		}
		r.inflight[b].requests = si.Requests
		for i, m := range inflightMetrics {
			enc, ok := si.Sketches[m.String()]
			if !ok {
				continue
			}
			sk, err := decodeSketchOf(enc, &inflightSketches)
			if err != nil {
				return fmt.Errorf("in-flight bucket %d, %s: %v", si.InflightMin, m, err)
			}
			r.inflight[b].sketches[i] = sk
		}
	}
	return nil
}

// snapshotStrata encodes a row's cells that have a request.
func snapshotStrata(st *aggStrata) ([]SnapshotCell, error) {
	if st == nil {
		return nil, nil
	}
	var out []SnapshotCell
	for c := range st {
		cell := &st[c]
		if cell.requests == 0 {
			continue
		}
		sc := SnapshotCell{Requests: cell.requests, Sketches: map[string]string{}}
		sc.InflightMin, _ = InflightRange(c / numInputBuckets)
		sc.InputMin, _ = InputRange(c % numInputBuckets)
		for i, m := range inflightMetrics {
			if sk := cell.sketches[i]; sk != nil && !sk.IsEmpty() {
				enc, err := encodeSketch(sk)
				if err != nil {
					return nil, fmt.Errorf("cell in-flight %d, input %d, %s: %v", sc.InflightMin, sc.InputMin, m, err)
				}
				sc.Sketches[m.String()] = enc
			}
		}
		out = append(out, sc)
	}
	return out, nil
}

// readStrata reads a row's cells back, each checked: a known cell, at most
// once, a non-negative count and sketches of the strata kind. None gives
// nil: a snapshot of a window without strata, or of an older tokentap.
func readStrata(in []SnapshotCell) (*aggStrata, error) {
	if len(in) == 0 {
		return nil, nil
	}
	st := new(aggStrata)
	var seen [numCells]bool
	for _, sc := range in {
		ib, nb := -1, -1
		for b := range numInflightBuckets {
			if lo, _ := InflightRange(b); lo == sc.InflightMin {
				ib = b
			}
		}
		for b := range numInputBuckets {
			if lo, _ := InputRange(b); lo == sc.InputMin {
				nb = b
			}
		}
		if ib < 0 || nb < 0 || seen[cellOf(ib, nb)] {
			return nil, fmt.Errorf("strata cell in-flight %d, input %d: not a cell's lowest values, or given twice", sc.InflightMin, sc.InputMin)
		}
		c := cellOf(ib, nb)
		seen[c] = true
		if sc.Requests < 0 {
			return nil, fmt.Errorf("strata cell in-flight %d, input %d: negative count", sc.InflightMin, sc.InputMin)
		}
		st[c].requests = sc.Requests
		for i, m := range inflightMetrics {
			enc, ok := sc.Sketches[m.String()]
			if !ok {
				continue
			}
			sk, err := decodeSketchOf(enc, &strataSketches)
			if err != nil {
				return nil, fmt.Errorf("strata cell in-flight %d, input %d, %s: %v", sc.InflightMin, sc.InputMin, m, err)
			}
			st[c].sketches[i] = sk
		}
	}
	return st, nil
}
