package stats

import (
	"math"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/sink"
)

// TestRecorderAllocations: a result lands in the row of its provider, model and
// labels, and recording into an existing row allocates nothing.
func TestRecorderAllocations(t *testing.T) {
	store := NewStore(Options{})
	s := Recorder{Store: store}
	now := time.Now()
	r := &sink.Result{
		M: &meter.Measurement{
			Request: meter.Request{Model: "gpt-4o"}, ResponseModel: "gpt-4o-2024-08-06",
			FirstToken: 100 * time.Millisecond, LastToken: time.Second, End: time.Second,
			Usage: meter.Usage{InputTokens: 3, OutputTokens: 10, Source: meter.UsageReported},
		},
		End:      now,
		Provider: "openai",
		Labels:   []sink.Label{{Name: "app", Value: "a"}, {Name: "team", Value: "t"}},
	}
	s.Record(r)
	rows := store.Aggregate(Window1m, now).Rows()
	if len(rows) != 1 {
		t.Fatalf("%d rows, want 1", len(rows))
	}
	k := rows[0].Key
	if k.Provider != "openai" || k.Model != "gpt-4o-2024-08-06" || len(k.Labels) != 2 ||
		k.Labels[0] != (Label{Name: "app", Value: "a"}) || k.Labels[1] != (Label{Name: "team", Value: "t"}) {
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

// TestRecorderCost: a result with a cost adds it to its row's cost
// distribution and total; one without (unpriced, or not billable) adds
// neither, so the row's cost count says how many requests were priced.
func TestRecorderCost(t *testing.T) {
	tests := []struct {
		name      string
		costs     []float64 // one result per entry; negative: no cost
		wantCount int64
		wantTotal float64
	}{
		{"every request priced", []float64{0.002, 0.003}, 2, 0.005},
		{"none priced", []float64{-1, -1}, 0, 0},
		{"some priced", []float64{0.001, -1, 0.004}, 2, 0.005},
		{"a free request is priced at zero", []float64{0, 0.001}, 2, 0.001},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := NewStore(Options{})
			s := Recorder{Store: store}
			now := time.Now()
			for _, c := range tt.costs {
				r := &sink.Result{
					M: &meter.Measurement{
						Request: meter.Request{Model: "gpt-4o"}, End: time.Second,
						Usage: meter.Usage{InputTokens: 3, OutputTokens: 10, Source: meter.UsageReported},
					},
					End: now, Provider: "openai",
				}
				if c >= 0 {
					r.Cost, r.HasCost = c, true
				} else {
					r.Unpriced = true
				}
				s.Record(r)
			}
			rows := store.Aggregate(Window1m, now).Rows()
			if len(rows) != 1 {
				t.Fatalf("%d rows, want 1", len(rows))
			}
			if got := rows[0].Count(Cost); got != tt.wantCount {
				t.Errorf("cost count %d, want %d", got, tt.wantCount)
			}
			if got := rows[0].Counts.CostUSD; math.Abs(got-tt.wantTotal) > 1e-15 {
				t.Errorf("cost total %v, want %v", got, tt.wantTotal)
			}
		})
	}
}

// TestRecorderInflight: a result whose response began is filed under its
// in-flight level, itself counted; one without is in no bucket.
func TestRecorderInflight(t *testing.T) {
	store := NewStore(Options{})
	s := Recorder{Store: store}
	now := time.Now()
	for _, r := range []*sink.Result{
		{Inflight: 0, InflightKnown: true}, // alone: level 1
		{Inflight: 2, InflightKnown: true}, // two ahead: level 3
		{Inflight: 0},                      // no response began
	} {
		r.M = &meter.Measurement{Request: meter.Request{Model: "m"}, FirstToken: 100 * time.Millisecond, End: time.Second}
		r.End, r.Provider = now, "openai"
		s.Record(r)
	}
	rep := store.Aggregate(Window1m, now).Report(now)
	got := rep.Rows[0].ByInflight
	if len(got) != 2 || got[0].InflightMin != 1 || got[0].Requests != 1 || got[1].InflightMin != 2 || got[1].Requests != 1 {
		t.Errorf("by_inflight %+v, want one request at 1 and one at 2-3", got)
	}
}
