package otelexport

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/testutil/measuretest"
)

// TestProbeAttribute: a probe's span and metric points carry
// tokentap.probe=true; other exchanges carry no such attribute, so that
// their series are the ones they had before probes existed.
func TestProbeAttribute(t *testing.T) {
	for _, tt := range []struct {
		name  string
		probe bool
	}{{"a probe", true}, {"a client request", false}} {
		t.Run(tt.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			ctx, _ := tp.Tracer("test").Start(context.Background(), "chat")
			r := &sink.Result{Ctx: ctx, M: measuretest.Streamed(), Provider: "openai", Probe: tt.probe}
			Spans{}.Record(r)
			var onSpan, onMetric *attribute.Value
			for _, kv := range rec.Ended()[0].Attributes() {
				if kv.Key == attrProbe {
					onSpan = &kv.Value
				}
			}
			for _, kv := range appendMetricAttributes(nil, r) {
				if kv.Key == attrProbe {
					onMetric = &kv.Value
				}
			}
			for where, v := range map[string]*attribute.Value{"span": onSpan, "metric points": onMetric} {
				if tt.probe && (v == nil || !v.AsBool()) {
					t.Errorf("%s: no tokentap.probe=true", where)
				}
				if !tt.probe && v != nil {
					t.Errorf("%s: tokentap.probe=%s", where, v.Emit())
				}
			}
		})
	}
}
