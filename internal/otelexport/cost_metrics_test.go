package otelexport

import (
	"context"
	"math"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/testutil/measuretest"
)

// TestCostCounters: tokentap.cost sums the priced exchanges' costs and
// tokentap.cost.unpriced counts the exchanges without a price, each under
// the exchange's metric attributes; an exchange with neither adds nothing.
func TestCostCounters(t *testing.T) {
	ins, reader := newTestInstruments(t)
	for _, r := range []*sink.Result{
		{Ctx: context.Background(), M: measuretest.Streamed(), Provider: "openai", Cost: 0.0125, HasCost: true},
		{Ctx: context.Background(), M: measuretest.Streamed(), Provider: "openai", Cost: 0.0025, HasCost: true},
		{Ctx: context.Background(), M: measuretest.Streamed(), Provider: "openai", Unpriced: true},
		{Ctx: context.Background(), M: measuretest.Streamed(), Provider: "openai"},
	} {
		ins.Record(r)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var costSum float64
	var unpriced int64
	var costUnit string
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[float64]:
				if m.Name == metricCost {
					costUnit = m.Unit
					for _, dp := range d.DataPoints {
						costSum += dp.Value
						if v, _ := dp.Attributes.Value("gen_ai.provider.name"); v.AsString() != "openai" {
							t.Errorf("cost point without the exchange's attributes: %v", dp.Attributes.ToSlice())
						}
					}
				}
			case metricdata.Sum[int64]:
				if m.Name == metricUnpriced {
					for _, dp := range d.DataPoints {
						unpriced += dp.Value
					}
				}
			}
		}
	}
	if math.Abs(costSum-0.015) > 1e-15 || unpriced != 1 || costUnit != "{USD}" {
		t.Errorf("tokentap.cost %v (unit %q), tokentap.cost.unpriced %d; want 0.015 {USD}, 1", costSum, costUnit, unpriced)
	}
}
