package otelexport

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/slo"
	"github.com/tokentap/tokentap/internal/testutil/measuretest"
)

// TestSLOCounters: tokentap.slo.requests counts the judged exchanges by
// tokentap.slo.met, and tokentap.slo.goodput_tokens sums the output tokens
// of those that met; an exchange no objective judged adds to neither.
func TestSLOCounters(t *testing.T) {
	ins, reader := newTestInstruments(t)
	for _, v := range []slo.Verdict{slo.Met, slo.Met, slo.Missed, slo.NotJudged} {
		ins.Record(&sink.Result{Ctx: context.Background(), M: measuretest.Streamed(), Provider: "openai", SLO: v})
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	byMet := map[bool]int64{}
	var goodput int64
	units := map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			d, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			switch m.Name {
			case metricSLORequests:
				units[m.Name] = m.Unit
				for _, dp := range d.DataPoints {
					met, ok := dp.Attributes.Value(attrSLOMet)
					if !ok {
						t.Errorf("an slo.requests point without tokentap.slo.met: %v", dp.Attributes.ToSlice())
					}
					byMet[met.AsBool()] += dp.Value
				}
			case metricSLOGoodput:
				units[m.Name] = m.Unit
				for _, dp := range d.DataPoints {
					goodput += dp.Value
					if _, ok := dp.Attributes.Value(attrSLOMet); ok {
						t.Errorf("a goodput point carries tokentap.slo.met: %v", dp.Attributes.ToSlice())
					}
				}
			}
		}
	}
	// measuretest.Streamed reports 101 output tokens.
	if byMet[true] != 2 || byMet[false] != 1 || goodput != 202 {
		t.Errorf("slo.requests met %d, missed %d; goodput tokens %d; want 2, 1, 202", byMet[true], byMet[false], goodput)
	}
	if units[metricSLORequests] != "{request}" || units[metricSLOGoodput] != "{token}" || len(units) != 2 {
		t.Errorf("units %v, want {request} and {token}", units)
	}
}
