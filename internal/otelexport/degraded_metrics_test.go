package otelexport

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/testutil/measuretest"
)

// TestDegradedCounter: tokentap.degraded counts each exchange whose
// measurement a fault cost something once, whatever its number of faults,
// under the exchange's attributes and its first fault's reason; a clean
// exchange adds nothing.
func TestDegradedCounter(t *testing.T) {
	degraded := func(n int64, reason string) *meter.Measurement {
		m := measuretest.Streamed()
		m.Degraded, m.DegradedReason = n, reason
		return m
	}
	ins, reader := newTestInstruments(t)
	for _, m := range []*meter.Measurement{
		degraded(3, "invoke_chunk_unknown"),
		degraded(1, "invoke_chunk_unknown"),
		degraded(1, "event_not_json"),
		measuretest.Streamed(),
	} {
		ins.Record(&sink.Result{Ctx: context.Background(), M: m, Provider: "aws.bedrock"})
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != metricDegraded {
				continue
			}
			if m.Unit != "{request}" {
				t.Errorf("unit %q, want {request}", m.Unit)
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				reason, _ := dp.Attributes.Value(attrDegradedReason)
				if v, _ := dp.Attributes.Value("gen_ai.provider.name"); v.AsString() != "aws.bedrock" {
					t.Errorf("point without the exchange's attributes: %v", dp.Attributes.ToSlice())
				}
				got[reason.AsString()] += dp.Value
			}
		}
	}
	want := map[string]int64{"invoke_chunk_unknown": 2, "event_not_json": 1}
	if len(got) != len(want) || got["invoke_chunk_unknown"] != 2 || got["event_not_json"] != 1 {
		t.Errorf("tokentap.degraded by reason %v, want %v", got, want)
	}
}
