package caddymodule

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/sink"
)

// provisionTelemetry attaches h to the shared TracerProvider and
// MeterProvider, shows the metrics on the Prometheus registry of the config
// being loaded, and lists the sinks each finished exchange goes to. The
// handler's lease undoes all of it once the config is gone and its last
// exchange has ended.
func (h *Handler) provisionTelemetry(ctx caddy.Context) error {
	tp, releaseTracer, err := otelexport.AcquireTracerProvider(ctx, h.logger)
	if err != nil {
		return fmt.Errorf("setting up trace export: %v", err)
	}
	p, releaseMeter, err := otelexport.AcquireMeterProvider(ctx, h.logger)
	if err != nil {
		releaseTracer()
		return fmt.Errorf("setting up metric export: %v", err)
	}
	unregister := p.Register(ctx.GetMetricsRegistry(), h.logger)
	h.lease = &lease{release: func() {
		unregister()
		releaseMeter()
		releaseTracer()
	}}
	h.tracer = otelexport.Tracer(tp)
	h.propagator = otelexport.Propagator()

	// In this order: the live stats first, so that the span can mark a
	// request measured while its row was slow (sink.Result.RowSlow); the
	// span ends at the measured end whatever any sink does (record.go).
	h.sinks = append(h.sinks[:0],
		namedSink{"stats", sink.Stats{Store: liveStats}},
		namedSink{"span", otelexport.Spans{Langfuse: h.Langfuse}})
	if p.Instruments.Enabled() {
		h.sinks = append(h.sinks, namedSink{"metrics", p.Instruments})
		healthInstruments.Store(p.Instruments)
	}
	h.sinks = append(h.sinks, namedSink{"access log", accessLog{}})
	return nil
}

// namedSink is a sink with the name its recovered panics are logged under.
type namedSink struct {
	name string
	sink.Sink
}
