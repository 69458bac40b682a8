package otelexport

import (
	"sync"

	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel/propagation"
)

// Propagator is the W3C trace context and baggage propagator, or what
// OTEL_PROPAGATORS names, as in Caddy's tracing handler.
var Propagator = sync.OnceValue(func() propagation.TextMapPropagator {
	return autoprop.NewTextMapPropagator()
})
