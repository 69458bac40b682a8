package stats

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"
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
}

// SnapshotRow is one row's state.
type SnapshotRow struct {
	RowID

	// Requests, Errors and Aborts are as in the Report; Estimated counts
	// the requests whose token counts were estimated.
	Requests  int64 `json:"requests"`
	Errors    int64 `json:"errors"`
	Aborts    int64 `json:"aborts"`
	Estimated int64 `json:"estimated"`
	// CostUSD is as in the Report; absent (0) in snapshots from a
	// tokentap without costs.
	CostUSD float64 `json:"cost_usd"`
	// SLORequests, SLOMet and GoodputTokens are the counts behind the
	// Report's slo: requests judged, requests that met their objective
	// and those requests' output tokens.
	SLORequests   int64 `json:"slo_requests"`
	SLOMet        int64 `json:"slo_met"`
	GoodputTokens int64 `json:"goodput_tokens"`

	// Sketches maps a metric's name (as in the Report) to its sketch:
	// base64 of the sketches-go DDSketch protobuf. Metrics no request
	// observed are absent.
	Sketches map[string]string `json:"sketches"`
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
		sr := SnapshotRow{
			RowID:         rowID(r),
			Requests:      r.Counts.Requests,
			Errors:        r.Counts.Errors,
			Aborts:        r.Counts.Aborts,
			Estimated:     r.Counts.Estimated,
			CostUSD:       r.Counts.CostUSD,
			SLORequests:   r.Counts.SLORequests,
			SLOMet:        r.Counts.SLOMet,
			GoodputTokens: r.Counts.GoodputTokens,
			Sketches:      map[string]string{},
		}
		for m, sk := range r.sketches {
			if sk == nil || sk.IsEmpty() {
				continue
			}
			enc, err := encodeSketch(sk)
			if err != nil {
				return nil, fmt.Errorf("encoding %s of %s/%s: %v", Metric(m), r.Key.Provider, r.Key.Model, err)
			}
			sr.Sketches[Metric(m).String()] = enc
		}
		snap.Rows = append(snap.Rows, sr)
	}
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
	for i := range s.Rows {
		sr := &s.Rows[i]
		if sr.Requests < 0 || sr.Errors < 0 || sr.Aborts < 0 || sr.Estimated < 0 ||
			sr.SLORequests < 0 || sr.SLOMet < 0 || sr.GoodputTokens < 0 {
			return nil, fmt.Errorf("row %d (%s/%s): negative count", i, sr.Provider, sr.Model)
		}
		if sr.SLOMet > sr.SLORequests {
			return nil, fmt.Errorf("row %d (%s/%s): slo_met %d over slo_requests %d", i, sr.Provider, sr.Model, sr.SLOMet, sr.SLORequests)
		}
		if !(sr.CostUSD >= 0 && sr.CostUSD <= maxValue) {
			return nil, fmt.Errorf("row %d (%s/%s): cost_usd %v: want 0 to %g", i, sr.Provider, sr.Model, sr.CostUSD, float64(maxValue))
		}
		r := &AggregateRow{
			Key:      Key{Provider: sr.Provider, Model: sr.Model},
			Overflow: sr.Overflow,
			Counts:   Counts{sr.Requests, sr.Errors, sr.Aborts, sr.Estimated, sr.CostUSD, sr.SLORequests, sr.SLOMet, sr.GoodputTokens},
		}
		for name, value := range sr.Labels {
			r.Key.Labels = append(r.Key.Labels, Label{name, value})
		}
		sort.Slice(r.Key.Labels, func(i, j int) bool { return r.Key.Labels[i].Name < r.Key.Labels[j].Name })
		for name, enc := range sr.Sketches {
			m, ok := LookupMetric(name)
			if !ok || m.String() != name {
				continue
			}
			sk, err := decodeSketch(enc)
			if err != nil {
				return nil, fmt.Errorf("row %d (%s/%s), %s: %v", i, sr.Provider, sr.Model, name, err)
			}
			r.sketches[m] = sk
		}
		a.add(r)
	}
	return a, nil
}
