package caddymodule

import (
	"github.com/tokentap/tokentap/stats"
)

// liveStats is the process's live stats. It is process-wide, like the
// TracerProvider, and outlives config reloads: a reload must not empty the
// comparison, and the admin API that serves it (adminapi.go) is rebuilt on
// every config load too.
var liveStats = stats.NewStore(stats.Options{})

// maxInlineLabels is how many labels recordStats passes without allocating;
// more are still recorded, at the cost of one allocation.
const maxInlineLabels = 8

// recordStats adds a finished exchange to the live stats, in the row of its
// provider, model (the response's, else the request's) and labels.
func (h *Handler) recordStats(f *finished) {
	model := f.m.ResponseModel
	if model == "" {
		model = f.m.Request.Model
	}
	var inline [maxInlineLabels]stats.Label
	labels := inline[:0]
	for _, l := range f.labels {
		labels = append(labels, stats.Label{Name: l.name, Value: l.value})
	}
	key := stats.Key{Provider: f.provider, Model: model, Labels: labels}
	sample := stats.SampleOf(f.m)
	liveStats.Record(&key, &sample, f.end)
}
