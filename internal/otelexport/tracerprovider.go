package otelexport

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
)

// sharedTracerProvider is the process-wide TracerProvider: one per handler
// would drop or duplicate spans on each reload (shared.go).
var sharedTracerProvider = shared[trace.TracerProvider]{what: "trace exporter"}

// TracerProviderOverride, when set before the shared provider is built,
// is used instead of one built from the environment: tests capture spans
// in memory with it. It is never shut down by the last release.
var TracerProviderOverride trace.TracerProvider

// AcquireTracerProvider returns the shared TracerProvider, building it on
// first use, and a release function to call once the caller is done with
// it (for a Caddy handler, once its config is unloaded and its last
// exchange has ended).
func AcquireTracerProvider(ctx context.Context, logger *zap.Logger) (trace.TracerProvider, func(), error) {
	// The exporter is built only when a provider is really needed, so
	// reloads do not start exporter goroutines that are never used.
	return sharedTracerProvider.acquire(logger, func() (trace.TracerProvider, func(context.Context) error, error) {
		tp, shutdown, err := newTracerProvider(ctx, logger)
		if err != nil || shutdown == nil {
			return tp, shutdown, err
		}
		return tp, func(ctx context.Context) error {
			err := shutdown(ctx)
			logSpansLost(logger)
			return err
		}, nil
	})
}

// logSpansLost logs what the process lost so far, once per shutdown (the
// last config unloaded or the process exiting): the lines logged along the
// way are rate-limited, so only this one has the totals.
func logSpansLost(logger *zap.Logger) {
	if c := SpanExportCounts(); c.Dropped > 0 || c.Failed > 0 {
		logger.Warn("trace export stopped; spans were lost",
			zap.Int64("exported", c.Exported),
			zap.Int64("dropped", c.Dropped),
			zap.Int64("failed", c.Failed),
			zap.Int64("still_queued", c.Queued))
	}
}

// newTracerProvider builds a TracerProvider from the standard OTEL_*
// environment variables. OTLP over gRPC is the default; the SDK itself reads
// the endpoint, headers, TLS, timeout, sampler and batch settings.
func newTracerProvider(ctx context.Context, logger *zap.Logger) (trace.TracerProvider, func(context.Context) error, error) {
	if TracerProviderOverride != nil {
		return TracerProviderOverride, nil, nil
	}
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return noop.NewTracerProvider(), nil, nil
	}
	queue, batch, err := batchLimits()
	if err != nil {
		return nil, nil, err
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
		// without limit or waited for on the request path. The gate in
		// front of it does the dropping, so that each drop is counted
		// and reported.
		opts = append(opts, sdktrace.WithSpanProcessor(newBoundedBatcher(exp, queue, batch, logger)))
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
func exporterNames() []string { return exporterList("OTEL_TRACES_EXPORTER") }

// exporterList reads an OTEL_*_EXPORTER variable: a comma-separated list of
// exporter names, case-insensitive, defaulting to otlp as the specification
// says.
func exporterList(variable string) []string {
	v := strings.TrimSpace(os.Getenv(variable))
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
			attribute.String("service.version", Version()),
		),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithFromEnv(),
	)
}

// batchLimits reads the batch processor's queue and batch sizes the way the
// SDK does (OTEL_BSP_MAX_QUEUE_SIZE, default 2048;
// OTEL_BSP_MAX_EXPORT_BATCH_SIZE, default 512, at most the queue), so that
// the gate in front of the queue and the queue itself agree. Unlike the SDK,
// which falls back to the default on a value it cannot read and panics on
// a negative queue size, a bad value is a configuration error.
func batchLimits() (queue, batch int, err error) {
	queue, err = positiveEnv("OTEL_BSP_MAX_QUEUE_SIZE", sdktrace.DefaultMaxQueueSize)
	if err != nil {
		return 0, 0, err
	}
	batch, err = positiveEnv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", sdktrace.DefaultMaxExportBatchSize)
	if err != nil {
		return 0, 0, err
	}
	return queue, min(batch, queue), nil
}

func positiveEnv(name string, def int) (int, error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s must be a positive integer, got %q", name, v)
	}
	return n, nil
}

// Holders reports how many holders the shared TracerProvider and
// MeterProvider have now. Every acquire must be released, across reloads
// and streams that outlive their config; the adapter's tests check it here.
func Holders() (tracerProvider, meterProvider int) {
	return sharedTracerProvider.holders(), sharedMeterProvider.holders()
}
