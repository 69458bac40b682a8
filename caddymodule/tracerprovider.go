package caddymodule

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
)

// internalPanics counts panics recovered in tokentap's measuring code across
// all handlers, for the metrics and the tests.
var internalPanics atomic.Int64

// sharedTracer is the process-wide TracerProvider. Caddy provisions a new
// handler for every config load and cleans up the old one afterwards, so a
// provider per handler would drop or duplicate spans on each reload; instead
// handlers share one, counted, and the last to go flushes and shuts it down.
var sharedTracer struct {
	mu       sync.Mutex
	refs     int
	provider trace.TracerProvider
	shutdown func(context.Context) error
}

// tracerProviderOverride lets tests capture spans in memory.
var tracerProviderOverride trace.TracerProvider

// acquireTracerProvider returns the shared TracerProvider, building it on
// first use, and a release function to call from Cleanup.
func acquireTracerProvider(ctx context.Context, logger *zap.Logger) (trace.TracerProvider, func(), error) {
	s := &sharedTracer
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs == 0 {
		// The exporter is built only when a provider is really needed, so
		// reloads do not start exporter goroutines that are never used.
		tp, shutdown, err := newTracerProvider(ctx, logger)
		if err != nil {
			return nil, nil, err
		}
		s.provider, s.shutdown = tp, shutdown
	}
	s.refs++
	var once sync.Once
	return s.provider, func() { once.Do(func() { releaseTracerProvider(logger) }) }, nil
}

func releaseTracerProvider(logger *zap.Logger) {
	s := &sharedTracer
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs--
	if s.refs > 0 {
		return
	}
	shutdown := s.shutdown
	s.provider, s.shutdown = nil, nil
	if shutdown == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		logger.Warn("shutting down the trace exporter", zap.Error(err))
	}
}

// newTracerProvider builds a TracerProvider from the standard OTEL_*
// environment variables. OTLP over gRPC is the default; the SDK itself reads
// the endpoint, headers, TLS, timeout, sampler and batch settings.
func newTracerProvider(ctx context.Context, logger *zap.Logger) (trace.TracerProvider, func(context.Context) error, error) {
	if tracerProviderOverride != nil {
		return tracerProviderOverride, nil, nil
	}
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return noop.NewTracerProvider(), nil, nil
	}
	var opts []sdktrace.TracerProviderOption
	for _, name := range exporterNames() {
		exp, err := newSpanExporter(ctx, name)
		if err != nil {
			return nil, nil, err
		}
		if exp == nil {
			continue
		}
		// The batcher's queue is bounded (OTEL_BSP_MAX_QUEUE_SIZE): when
		// the collector is slow or down, spans are dropped, never queued
		// without limit or waited for on the request path.
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	if len(opts) == 0 {
		return noop.NewTracerProvider(), nil, nil
	}
	res, err := newResource(ctx)
	if err != nil {
		// A resource detector failing costs attributes, not traces.
		logger.Warn("building the OpenTelemetry resource", zap.Error(err))
	}
	opts = append(opts, sdktrace.WithResource(res))
	tp := sdktrace.NewTracerProvider(opts...)
	return tp, func(ctx context.Context) error {
		ferr := tp.ForceFlush(ctx)
		serr := tp.Shutdown(ctx)
		if ferr != nil {
			return ferr
		}
		return serr
	}, nil
}

// exporterNames reads OTEL_TRACES_EXPORTER: a comma-separated list of otlp,
// console and none, defaulting to otlp.
func exporterNames() []string {
	v := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))
	if v == "" {
		return []string{"otlp"}
	}
	var names []string
	for _, n := range strings.Split(v, ",") {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
			names = append(names, n)
		}
	}
	return names
}

func newSpanExporter(ctx context.Context, name string) (sdktrace.SpanExporter, error) {
	switch name {
	case "none":
		return nil, nil
	case "console":
		return stdouttrace.New(stdouttrace.WithWriter(os.Stderr))
	case "otlp":
		switch protocol := otlpProtocol(); protocol {
		case "grpc":
			return otlptracegrpc.New(ctx)
		case "http/protobuf":
			return otlptracehttp.New(ctx)
		default:
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL %q is not supported (use grpc or http/protobuf)", protocol)
		}
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER %q is not supported (use otlp, console or none)", name)
	}
}

// otlpProtocol is the OTLP transport for traces. tokentap defaults to gRPC,
// as the OTLP exporter spec does, where Caddy's own tracing defaults to
// http/protobuf.
func otlpProtocol() string {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			return strings.ToLower(v)
		}
	}
	return "grpc"
}

// newResource describes this process. tokentap is the default service name;
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override it, because
// WithFromEnv comes after it.
func newResource(ctx context.Context) (*resource.Resource, error) {
	return resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", "tokentap"),
			attribute.String("service.version", version()),
		),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithFromEnv(),
	)
}

// propagator is the W3C trace context and baggage propagator, or what
// OTEL_PROPAGATORS names, as in Caddy's tracing handler.
var propagator = sync.OnceValue(func() propagation.TextMapPropagator {
	return autoprop.NewTextMapPropagator()
})
