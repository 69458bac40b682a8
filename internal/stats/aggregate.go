package stats

import (
	"fmt"
	"sort"

	"github.com/DataDog/sketches-go/ddsketch"

	"github.com/tokentap/tokentap/internal/drift"
)

// Aggregate is one window's state: per row, the counts and one sketch per
// metric, merged over the window's slices. Aggregates of several instances
// merge exactly, bin by bin.
type Aggregate struct {
	window Window
	rows   map[string]*AggregateRow
	// live is the requests in flight when the view was taken (live.go).
	live []LiveRow
}

// AggregateRow is one row of an Aggregate.
type AggregateRow struct {
	// Key is the row's provider, model and labels.
	Key Key
	// Overflow marks the row of the keys past the row cap.
	Overflow bool
	// Counts are the row's requests, errors, aborts and estimates.
	Counts Counts
	// sketches are nil for metrics without a point.
	sketches [NumMetrics]*ddsketch.DDSketch
	// Series is the row's slices, oldest first, when the aggregate was
	// asked for them (Store.Series); nil otherwise.
	Series []SeriesSlice
	// inflight is the row's in-flight view, by bucket.
	inflight [numInflightBuckets]inflightAgg
	// strata is the row's cells of (in-flight level x input size), nil
	// when the window keeps none or no request had a cell.
	strata *aggStrata
	// Health is the row's health now (not the window's), when HasHealth:
	// every row but the overflow row has one.
	Health    drift.Health
	HasHealth bool
	// Headroom is the row's latest rate limit state (not the window's);
	// zero when no response reported one.
	Headroom Headroom
}

func newAggregate(w Window) *Aggregate {
	return &Aggregate{window: w, rows: map[string]*AggregateRow{}}
}

// Window returns the aggregate's window.
func (a *Aggregate) Window() Window { return a.window }

// add merges r into a's row of the same key, taking r if there is none.
func (a *Aggregate) add(r *AggregateRow) {
	id := r.Key.id(r.Overflow)
	have := a.rows[id]
	if have == nil {
		a.rows[id] = r
		return
	}
	have.Counts.add(r.Counts)
	mergeSketches(have.sketches[:], r.sketches[:], newViewSketch)
	mergeHealth(have, r)
	if r.Headroom.At.After(have.Headroom.At) {
		// The latest report wins, whichever instance saw it.
		have.Headroom = r.Headroom
	}
	for b := range r.inflight {
		have.inflight[b].requests += r.inflight[b].requests
		mergeSketches(have.inflight[b].sketches[:], r.inflight[b].sketches[:], newInflightViewSketch)
	}
	mergeStrata(&have.strata, r.strata)
	if r.Series != nil {
		have.Series = mergeSeries(have.Series, r.Series)
	}
}

// Merge adds b's rows to a: rows of the same provider, model and labels
// merge their counts and sketches. The windows must match.
func (a *Aggregate) Merge(b *Aggregate) error {
	if a.window != b.window {
		return fmt.Errorf("cannot merge window %s into window %s", b.window, a.window)
	}
	for _, r := range b.sortedRows() {
		c := &AggregateRow{Key: r.Key, Overflow: r.Overflow, Counts: r.Counts, Health: r.Health, HasHealth: r.HasHealth, Headroom: r.Headroom}
		for m, sk := range r.sketches {
			if sk != nil {
				c.sketches[m] = sk.Copy()
			}
		}
		for i := range r.Series {
			c.Series = append(c.Series, copySlice(&r.Series[i]))
		}
		for b := range r.inflight {
			c.inflight[b].requests = r.inflight[b].requests
			mergeSketches(c.inflight[b].sketches[:], r.inflight[b].sketches[:], newInflightViewSketch)
		}
		mergeStrata(&c.strata, r.strata)
		a.add(c)
	}
	a.mergeLive(b.live)
	return nil
}

// Rows returns the rows sorted by provider, model and labels, with the
// overflow row last.
func (a *Aggregate) Rows() []*AggregateRow { return a.sortedRows() }

func (a *Aggregate) sortedRows() []*AggregateRow {
	ids := make([]string, 0, len(a.rows))
	for id := range a.rows {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]*AggregateRow, len(ids))
	for i, id := range ids {
		out[i] = a.rows[id]
	}
	return out
}

// Count returns how many requests observed metric m.
func (r *AggregateRow) Count(m Metric) int64 { return sketchCount(r.sketches[m]) }

// sketchCount is how many points sk holds; 0 for nil.
func sketchCount(sk *ddsketch.DDSketch) int64 {
	if sk == nil {
		return 0
	}
	return int64(sk.GetCount() + 0.5)
}

// Quantile returns metric m's value at quantile q (0 to 1), within
// RelativeAccuracy of the value of the request at rank q*(count-1); ok is
// false when no request observed m.
func (r *AggregateRow) Quantile(m Metric, q float64) (v float64, ok bool) {
	sk := r.sketches[m]
	if sk == nil || sk.IsEmpty() {
		return 0, false
	}
	v, err := sk.GetValueAtQuantile(q)
	return v, err == nil
}

// mergeHealth merges the health of the same row on another instance into
// have: the worse state wins (slow over ok over insufficient_data), so a
// model slow behind one instance of a fleet shows slow; between two equal
// states, the earlier since.
func mergeHealth(have, r *AggregateRow) {
	switch {
	case !r.HasHealth:
	case !have.HasHealth, healthRank(r.Health.State) > healthRank(have.Health.State),
		r.Health.State == have.Health.State && r.Health.Since.Before(have.Health.Since):
		have.Health, have.HasHealth = r.Health, true
	}
}

func healthRank(s drift.State) int {
	switch s {
	case drift.Slow:
		return 2
	case drift.OK:
		return 1
	}
	return 0
}
