package otelexport

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestHistoryMetrics: the restore and save counters report the process's
// counts by result at collection; a result outside their lists is not
// counted.
func TestHistoryMetrics(t *testing.T) {
	_, reader := newTestInstruments(t)
	// The counts are the process's: other tests' collections must not
	// see these.
	t.Cleanup(func() {
		for i := range restoreCounts {
			restoreCounts[i].Store(0)
		}
		for i := range saveCounts {
			saveCounts[i].Store(0)
		}
	})
	read := func() map[string]map[string]int64 {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != metricStatsRestore && m.Name != metricStatsSave {
					continue
				}
				sum := m.Data.(metricdata.Sum[int64])
				if !sum.IsMonotonic {
					t.Errorf("%s is not monotonic", m.Name)
				}
				out[m.Name] = map[string]int64{}
				for _, dp := range sum.DataPoints {
					r, _ := dp.Attributes.Value(attrHistoryResult)
					out[m.Name][r.AsString()] = dp.Value
				}
			}
		}
		return out
	}
	base := read()
	CountHistoryRestore(HistoryCorrupt)
	CountHistoryRestore("nonsense")
	CountHistorySave(HistorySaved)
	CountHistorySave(HistorySaved)
	CountHistorySave(HistorySaveFailed)
	got := read()
	cases := []struct {
		metric, result string
		want           int64
	}{
		{metricStatsRestore, HistoryCorrupt, 1},
		{metricStatsRestore, "nonsense", 0},
		{metricStatsSave, HistorySaved, 2},
		{metricStatsSave, HistorySaveFailed, 1},
	}
	for _, c := range cases {
		if d := got[c.metric][c.result] - base[c.metric][c.result]; d != c.want {
			t.Errorf("%s{%s} rose by %d, want %d", c.metric, c.result, d, c.want)
		}
	}
}
