package sink

import (
	"github.com/tokentap/tokentap/internal/drift"
	"github.com/tokentap/tokentap/internal/slo"
	"github.com/tokentap/tokentap/internal/stats"
)

// maxInlineLabels is how many labels Stats passes without allocating; more
// are still recorded, at the cost of one allocation.
const maxInlineLabels = 8

// Stats records results in a live stats store, in the row of their
// provider, model and labels.
type Stats struct {
	Store *stats.Store
}

// Record adds r to its row, and sets r.RowSlow from the row's health.
func (s Stats) Record(r *Result) {
	var inline [maxInlineLabels]stats.Label
	labels := inline[:0]
	for _, l := range r.Labels {
		labels = append(labels, stats.Label{Name: l.Name, Value: l.Value})
	}
	key := stats.Key{Provider: r.Provider, Model: r.Model(), Labels: labels}
	sample := stats.SampleOf(r.M)
	if r.HasCost {
		sample.Set(stats.Cost, r.Cost)
	}
	sample.SLOJudged, sample.SLOMet = r.SLO != slo.NotJudged, r.SLO == slo.Met
	if r.InflightKnown {
		// The level counts the request itself.
		sample.Inflight = r.Inflight + 1
	}
	sample.Drift = r.Drift
	r.RowSlow = s.Store.Record(&key, &sample, r.End) == drift.Slow
}
