package sink

import (
	"testing"
	"time"

	"github.com/tokentap/tokentap/meter"
	"github.com/tokentap/tokentap/stats"
)

// TestStatsSinkAllocations: a result lands in the row of its provider, model and
// labels, and recording into an existing row allocates nothing.
func TestStatsSinkAllocations(t *testing.T) {
	store := stats.NewStore(stats.Options{})
	s := Stats{Store: store}
	now := time.Now()
	r := &Result{
		M: &meter.Measurement{
			Request: meter.Request{Model: "gpt-4o"}, ResponseModel: "gpt-4o-2024-08-06",
			FirstToken: 100 * time.Millisecond, LastToken: time.Second, End: time.Second,
			Usage: meter.Usage{InputTokens: 3, OutputTokens: 10, Source: meter.UsageReported},
		},
		End:      now,
		Provider: "openai",
		Labels:   []Label{{Name: "app", Value: "a"}, {Name: "team", Value: "t"}},
	}
	s.Record(r)
	rows := store.Aggregate(stats.Window1m, now).Rows()
	if len(rows) != 1 {
		t.Fatalf("%d rows, want 1", len(rows))
	}
	k := rows[0].Key
	if k.Provider != "openai" || k.Model != "gpt-4o-2024-08-06" || len(k.Labels) != 2 ||
		k.Labels[0] != (stats.Label{Name: "app", Value: "a"}) || k.Labels[1] != (stats.Label{Name: "team", Value: "t"}) {
		t.Errorf("row key %+v", k)
	}
	if rows[0].Counts.Requests != 1 {
		t.Errorf("counts %+v, want one request", rows[0].Counts)
	}
	if raceEnabled {
		return // the race detector's instrumentation allocates
	}
	if allocs := testing.AllocsPerRun(100, func() { s.Record(r) }); allocs != 0 {
		t.Errorf("%v allocations per result into an existing row", allocs)
	}
}
