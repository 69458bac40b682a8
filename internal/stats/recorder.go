package stats

import (
	"github.com/tokentap/tokentap/internal/drift"
	"github.com/tokentap/tokentap/internal/meter/usagecheck"
	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/slo"
)

// maxInlineLabels is how many labels Record passes without allocating;
// more are still recorded, at the cost of one allocation.
const maxInlineLabels = 8

// Recorder records finished exchanges in a Store, each in the row of its
// provider, model and labels. It is not a sink.Sink: the exchange records
// the row before its sinks run, and gives them the row's health on the
// Result, so that no sink writes what another reads.
type Recorder struct {
	Store *Store
	// Drift sets the slowdown detector of the rows this recorder creates;
	// nil keeps the detector's defaults. A row takes the thresholds of
	// the first recorder that creates it.
	Drift *drift.Config
}

// Record adds r to its row and reports whether the row is slow.
func (rec Recorder) Record(r *sink.Result) (rowSlow bool) {
	var inline [maxInlineLabels]Label
	labels := inline[:0]
	for _, l := range r.Labels {
		labels = append(labels, Label{Name: l.Name, Value: l.Value})
	}
	key := Key{Provider: r.Provider, Model: r.Model(), Labels: labels}
	sample := SampleOf(r.M)
	if r.HasCost {
		sample.Set(Cost, r.Cost)
	}
	sample.SLOJudged, sample.SLOMet = r.SLO != slo.NotJudged, r.SLO == slo.Met
	if c := &r.UsageCheck; c.Status == usagecheck.Verified {
		sample.UsageVerified, sample.UsageMismatch = true, c.Mismatch
		sample.UsageReported, sample.UsageCounted = c.Reported, c.Counted
	}
	if r.InflightKnown {
		// The level counts the request itself.
		sample.Inflight = r.Inflight + 1
	}
	sample.Drift = rec.Drift
	if r.RateLimit.Known() {
		sample.RateLimit = &r.RateLimit
	}
	return rec.Store.Record(&key, &sample, r.End) == drift.Slow
}
