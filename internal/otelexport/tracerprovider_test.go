package otelexport

import (
	"context"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/testutil/otlpsink"
)

// withoutOverride runs a test against the real provider construction, with
// the shared state of other tests set aside.
func withoutOverride(t *testing.T) {
	saved := TracerProviderOverride
	TracerProviderOverride = nil
	sharedTracerProvider.setAside(t)
	t.Cleanup(func() { TracerProviderOverride = saved })
}

func TestNewTracerProviderFromEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    string // "noop" or "sdk"
		wantErr string
	}{
		{"default is otlp over gRPC", nil, "sdk", ""},
		{"none", map[string]string{"OTEL_TRACES_EXPORTER": "none"}, "noop", ""},
		{"console", map[string]string{"OTEL_TRACES_EXPORTER": "console"}, "sdk", ""},
		{"a list", map[string]string{"OTEL_TRACES_EXPORTER": "otlp, console"}, "sdk", ""},
		{"http/protobuf", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "sdk", ""},
		{"traces protocol wins", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "bogus", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, "sdk", ""},
		{"unknown exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "", `OTEL_TRACES_EXPORTER "zipkin" is not supported`},
		{"unknown protocol", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "", `"http/json" is not supported`},
		{"SDK disabled", map[string]string{"OTEL_SDK_DISABLED": "true"}, "noop", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withoutOverride(t)
			for _, k := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SDK_DISABLED"} {
				t.Setenv(k, "")
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			tp, shutdown, err := newTracerProvider(context.Background(), zap.NewNop())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := "sdk"
			if _, ok := tp.(noop.TracerProvider); ok {
				got = "noop"
			}
			if got != tt.want {
				t.Errorf("provider %T, want %s", tp, tt.want)
			}
			if shutdown != nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_ = shutdown(ctx)
			}
		})
	}
}

// TestSamplerFromEnv: OTEL_TRACES_SAMPLER reaches the provider.
func TestSamplerFromEnv(t *testing.T) {
	withoutOverride(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	tp, shutdown, err := newTracerProvider(context.Background(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()
	_, span := tp.Tracer("t").Start(context.Background(), "x")
	if span.IsRecording() {
		t.Error("always_off sampler ignored")
	}
	span.End()
}

// TestSharedProviderLifetime: handlers share one provider; it keeps
// exporting while any holds it, and the last release flushes what is queued
// to a real OTLP/gRPC endpoint and shuts it down.
func TestSharedProviderLifetime(t *testing.T) {
	withoutOverride(t)
	sink, err := otlpsink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.Endpoint())
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	// Only a flush can deliver within the test.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
	t.Setenv("OTEL_SERVICE_NAME", "gateway-eu")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=staging")

	logger := zap.NewNop()
	tp1, release1, err := AcquireTracerProvider(context.Background(), logger)
	if err != nil {
		t.Fatal(err)
	}
	tp2, release2, err := AcquireTracerProvider(context.Background(), logger)
	if err != nil {
		t.Fatal(err)
	}
	if tp1 != tp2 {
		t.Fatal("two handlers got two providers")
	}
	if _, ok := tp1.(*sdktrace.TracerProvider); !ok {
		t.Fatalf("provider %T", tp1)
	}
	_, span := tp1.Tracer("t").Start(context.Background(), "before reload", trace.WithSpanKind(trace.SpanKindClient))
	span.End()
	release1()
	release1() // idempotent: Caddy may clean up twice after a failed load
	if n := len(sink.Spans()); n != 0 {
		t.Fatalf("%d spans exported before the last release", n)
	}
	_, span = tp2.Tracer("t").Start(context.Background(), "after reload")
	span.End()
	release2()
	if n := len(sink.Spans()); n != 2 {
		t.Fatalf("%d spans at the sink after the last release, want 2 flushed", n)
	}
	for _, sp := range sink.Spans() {
		if sp.Resource["service.name"] != "gateway-eu" || sp.Resource["deployment.environment.name"] != "staging" {
			t.Errorf("resource %v: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES must win", sp.Resource)
		}
	}
	if !sharedTracerProvider.empty() {
		t.Errorf("%d holders of the provider after the last release", sharedTracerProvider.holders())
	}
	_, span = tp2.Tracer("t").Start(context.Background(), "after shutdown")
	if span.IsRecording() {
		t.Error("the provider still records after shutdown")
	}
	span.End()
}
