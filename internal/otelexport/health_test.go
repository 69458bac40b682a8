package otelexport

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tokentap/tokentap/internal/drift"
	"github.com/tokentap/tokentap/internal/sink"
)

// TestHealthMetrics: tokentap.health.slow reads each row's state from the
// health source at collection, 1 while slow; tokentap.health.transitions
// counts changes by the state entered.
func TestHealthMetrics(t *testing.T) {
	ins, reader := newTestInstruments(t)
	SetHealthSource(func(yield func(HealthRow)) {
		yield(HealthRow{Provider: "openai", Model: "gpt-slow", Labels: []sink.Label{{Name: "team", Value: "a"}}, State: drift.Slow})
		yield(HealthRow{Provider: "openai", Model: "gpt-fine", State: drift.OK})
	})
	t.Cleanup(func() { healthSource.Store(nil) })
	ins.RecordHealthChange("openai", "gpt-slow", nil, drift.OK)
	ins.RecordHealthChange("openai", "gpt-slow", nil, drift.Slow)
	ins.RecordHealthChange("openai", "gpt-slow", nil, drift.Slow)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	gauge := map[string]int64{}
	transitions := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case metricHealthSlow:
				for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
					model, _ := dp.Attributes.Value("gen_ai.response.model")
					gauge[model.AsString()] = dp.Value
					if model.AsString() == "gpt-slow" {
						if team, ok := dp.Attributes.Value(LabelAttrPrefix + "team"); !ok || team.AsString() != "a" {
							t.Errorf("gauge point without the row's label: %v", dp.Attributes.ToSlice())
						}
					}
				}
			case metricHealthTransitions:
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					st, _ := dp.Attributes.Value(attrHealthState)
					transitions[st.AsString()] += dp.Value
				}
			}
		}
	}
	if gauge["gpt-slow"] != 1 || gauge["gpt-fine"] != 0 || len(gauge) != 2 {
		t.Errorf("tokentap.health.slow %v, want gpt-slow 1 and gpt-fine 0", gauge)
	}
	if transitions["slow"] != 2 || transitions["ok"] != 1 || len(transitions) != 2 {
		t.Errorf("tokentap.health.transitions %v, want slow 2, ok 1", transitions)
	}
}
