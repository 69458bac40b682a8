package caddymodule

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokentap/tokentap/internal/exchange"
	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/stats"
)

// provisionTelemetry attaches h to the shared TracerProvider and
// MeterProvider, shows the metrics on the Prometheus registry of the config
// being loaded, and lists where each finished exchange goes: the live
// stats row, then the sinks. The handler's Cleanup undoes all of it once
// the config is gone and its last exchange has ended (Config.Release).
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
	h.cfg.Release = func() {
		unregister()
		releaseMeter()
		releaseTracer()
	}
	h.cfg.Tracer = otelexport.Tracer(tp)
	h.cfg.Propagator = otelexport.Propagator()

	h.cfg.Rows = stats.Recorder{Store: liveStats, Drift: h.drift}
	h.cfg.Live = &liveStreams
	h.cfg.Sinks = append(h.cfg.Sinks[:0], exchange.Named{Name: "span", Sink: otelexport.Spans{Langfuse: h.Langfuse}})
	if p.Instruments.Enabled() {
		h.cfg.Sinks = append(h.cfg.Sinks, exchange.Named{Name: "metrics", Sink: p.Instruments})
		healthInstruments.Store(p.Instruments)
	}
	h.cfg.Sinks = append(h.cfg.Sinks, exchange.Named{Name: "access log", Sink: accessLog{}})
	return nil
}
