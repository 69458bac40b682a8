package otelexport

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// The requests in flight right now (Prometheus: tokentap_active_requests),
// by tokentap.request.state: the streams' view of an incident while it
// happens, where the histograms speak only when requests end.
const (
	metricActiveRequests = "tokentap.active_requests"
	attrRequestState     = attribute.Key("tokentap.request.state")
)

// The states of a request in flight, which partition the gauge.
var (
	stateWaiting   = attrRequestState.String("waiting")
	stateReceiving = attrRequestState.String("receiving")
	stateStalled   = attrRequestState.String("stalled")
)

// ActiveRow is one provider and model's requests in flight, as the gauge
// reports them; Waiting, Receiving and Stalled add up to all of them.
type ActiveRow struct {
	Provider, Model             string
	Waiting, Receiving, Stalled int64
}

// activeSource lists the requests in flight for the gauge; the Caddy
// adapter sets it to read its streams.
var activeSource atomic.Pointer[func(yield func(ActiveRow))]

// SetActiveSource sets what the tokentap.active_requests gauge reads at
// each collection: f calls yield once per provider and model.
func SetActiveSource(f func(yield func(ActiveRow))) { activeSource.Store(&f) }

// newActiveInstruments creates the gauge of requests in flight, whose
// callback reads the active source. It is an up-down counter, as the HTTP
// conventions' http.server.active_requests is: a count that rises and
// falls, which sums across instances.
func newActiveInstruments(m metric.Meter) error {
	_, err := m.Int64ObservableUpDownCounter(metricActiveRequests,
		metric.WithUnit("{request}"),
		metric.WithDescription("Requests whose response has begun and not ended, by state (tokentap.request.state): waiting for the first byte of the body, receiving, or stalled (no byte for longer than the stall threshold)."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			f := activeSource.Load()
			if f == nil {
				return nil
			}
			(*f)(func(r ActiveRow) {
				provider := semconv.GenAIProviderNameKey.String(validUTF8(r.Provider))
				model := semconv.GenAIRequestModelKey.String(requestModels.Admit(validUTF8(r.Model)))
				o.Observe(r.Waiting, metric.WithAttributes(provider, model, stateWaiting))
				o.Observe(r.Receiving, metric.WithAttributes(provider, model, stateReceiving))
				o.Observe(r.Stalled, metric.WithAttributes(provider, model, stateStalled))
			})
			return nil
		}))
	return err
}
