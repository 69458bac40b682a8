package otelexport

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/tokentap/tokentap/internal/drift"
	"github.com/tokentap/tokentap/internal/sink"
)

// The health metrics (Prometheus: tokentap_health_slow,
// tokentap_health_transitions_total): a row's state as a gauge, 1 while
// slow, and each change of state counted, so that an alert can fire on the
// gauge and a dashboard can count incidents.
const (
	metricHealthSlow        = "tokentap.health.slow"
	metricHealthTransitions = "tokentap.health.transitions"
	// eventRowSlow is the span event of a request measured while its row
	// was slow.
	eventRowSlow = "tokentap.row_slow"
)

// HealthRow is one live stats row's health, as the gauge reports it.
type HealthRow struct {
	Provider, Model string
	Labels          []sink.Label
	State           drift.State
}

// healthSource lists the rows' health for the gauge; the Caddy adapter
// sets it to read its live stats.
var healthSource atomic.Pointer[func(yield func(HealthRow))]

// SetHealthSource sets what the tokentap.health.slow gauge reads at each
// collection: f calls yield once per row.
func SetHealthSource(f func(yield func(HealthRow))) { healthSource.Store(&f) }

// healthAttrs are a row's attributes on the health metrics: provider,
// model (as gen_ai.response.model, capped like the other metrics) and
// labels.
func healthAttrs(provider, model string, labels []sink.Label, extra ...attribute.KeyValue) []attribute.KeyValue {
	kvs := make([]attribute.KeyValue, 0, 2+len(labels)+len(extra))
	kvs = append(kvs,
		semconv.GenAIProviderNameKey.String(validUTF8(provider)),
		semconv.GenAIResponseModelKey.String(responseModels.Admit(validUTF8(model))))
	for _, l := range labels {
		kvs = append(kvs, labelKey(l.Name).String(validUTF8(l.Value)))
	}
	return append(kvs, extra...)
}

// newHealthInstruments creates the health gauge, whose callback reads the
// health source, and the transitions counter.
func newHealthInstruments(m metric.Meter, ins *Instruments) error {
	var err error
	ins.healthTransitions, err = m.Int64Counter(metricHealthTransitions,
		metric.WithUnit("{transition}"),
		metric.WithDescription("Changes of a live stats row's health (ok, slow, insufficient_data), by the state entered (tokentap.health.state): slowdowns against the row's own earlier requests."))
	if err != nil {
		return err
	}
	_, err = m.Int64ObservableGauge(metricHealthSlow,
		metric.WithUnit("1"),
		metric.WithDescription("1 while a live stats row is slow compared with its own earlier requests (its output tokens/s fell or its time to first token rose past the thresholds), else 0."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			f := healthSource.Load()
			if f == nil {
				return nil
			}
			(*f)(func(r HealthRow) {
				var v int64
				if r.State == drift.Slow {
					v = 1
				}
				o.Observe(v, metric.WithAttributes(healthAttrs(r.Provider, r.Model, r.Labels)...))
			})
			return nil
		}))
	return err
}

// RecordHealthChange counts a row's change of health.
func (ins *Instruments) RecordHealthChange(provider, model string, labels []sink.Label, st drift.State) {
	if !ins.Enabled() {
		return
	}
	ins.healthTransitions.Add(context.Background(), 1,
		metric.WithAttributes(healthAttrs(provider, model, labels, attrHealthState.String(st.String()))...))
}
