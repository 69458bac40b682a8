package caddymodule

import (
	"context"
	"expvar"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

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
	// What the process lost so far, once per shutdown (the last config
	// unloaded or the process exiting): the lines logged along the way
	// are rate-limited, so only this one has the totals.
	if c := spanExportCounts(); c.Dropped > 0 || c.Failed > 0 {
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
	if tracerProviderOverride != nil {
		return tracerProviderOverride, nil, nil
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

// spanExport counts what became of the spans tokentap ended, process wide
// and across reloads, for every trace exporter (a span sent to two
// exporters counts twice). Every span handed to an exporter's pipeline ends
// up in exactly one of exported, dropped or failed; queued is how many are
// on their way. The counts are published on Caddy's admin API at
// /debug/vars as tokentap_span_export, and losses are logged.
var spanExport struct {
	// queued spans wait in a batch processor's queue or batch.
	queued atomic.Int64
	// exported spans were accepted by their exporter.
	exported atomic.Int64
	// dropped spans found the queue full: the exporter was too slow or
	// unreachable for longer than the queue could hold.
	dropped atomic.Int64
	// failed spans were in a batch whose export returned an error (the
	// endpoint refused, timed out or rejected it) after the exporter's
	// own retries.
	failed atomic.Int64
}

// exportCounts is a snapshot of spanExport, for the admin API, the logs,
// the metrics and the tests.
type exportCounts struct {
	Queued   int64 `json:"queued"`
	Exported int64 `json:"exported"`
	Dropped  int64 `json:"dropped"`
	Failed   int64 `json:"failed"`
}

func spanExportCounts() exportCounts {
	return exportCounts{
		Queued:   spanExport.queued.Load(),
		Exported: spanExport.exported.Load(),
		Dropped:  spanExport.dropped.Load(),
		Failed:   spanExport.failed.Load(),
	}
}

func init() {
	// Caddy's admin API serves expvar at /debug/vars; an operator (or a
	// test driving the binary) reads the export's losses there without a
	// working exporter, which is when they matter.
	expvar.Publish("tokentap_span_export", expvar.Func(func() any { return spanExportCounts() }))
}

// exportLogInterval is the least time between two log lines about the same
// kind of loss, so a collector outage under load logs a line every few
// seconds with the counts, not one per span or batch.
var exportLogInterval = 10 * time.Second

// boundedBatcher is the SDK's batch span processor behind a gate that keeps
// its queue from ever overflowing: a span that would not fit is dropped
// here, counted and reported, rather than inside the SDK, which counts its
// drops where nothing reads them. OnEnd never blocks, whatever the
// exporter does, so the request path never waits for the collector.
type boundedBatcher struct {
	sdktrace.SpanProcessor
	// pending counts the spans handed to the batch processor and not yet
	// passed to the exporter: those in its queue and in the batch it is
	// filling. Kept at most max, it never exceeds the queue's capacity.
	pending *atomic.Int64
	max     int64
	stopped atomic.Bool
	report  *exportReport
}

func newBoundedBatcher(exp sdktrace.SpanExporter, queue, batch int, logger *zap.Logger) *boundedBatcher {
	pending := new(atomic.Int64)
	report := &exportReport{logger: logger, queue: queue}
	counted := &countingExporter{SpanExporter: exp, pending: pending, report: report}
	return &boundedBatcher{
		SpanProcessor: sdktrace.NewBatchSpanProcessor(counted,
			sdktrace.WithMaxQueueSize(queue),
			sdktrace.WithMaxExportBatchSize(batch)),
		pending: pending,
		max:     int64(queue),
		report:  report,
	}
}

// OnEnd queues a sampled span for export, or drops it if the queue is full.
func (b *boundedBatcher) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() || b.stopped.Load() {
		// The batch processor ignores both; nothing to count.
		b.SpanProcessor.OnEnd(s)
		return
	}
	if b.pending.Add(1) > b.max {
		b.pending.Add(-1)
		spanExport.dropped.Add(1)
		b.report.dropped()
		return
	}
	spanExport.queued.Add(1)
	b.SpanProcessor.OnEnd(s)
}

// Shutdown stops queueing before the batch processor drains its queue.
func (b *boundedBatcher) Shutdown(ctx context.Context) error {
	b.stopped.Store(true)
	return b.SpanProcessor.Shutdown(ctx)
}

// countingExporter counts each batch as it leaves the queue and how its
// export ended.
type countingExporter struct {
	sdktrace.SpanExporter
	pending *atomic.Int64
	report  *exportReport
}

// ExportSpans exports a batch and counts it as exported or failed.
func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	n := int64(len(spans))
	e.pending.Add(-n)
	spanExport.queued.Add(-n)
	err := e.SpanExporter.ExportSpans(ctx, withValidUTF8(spans))
	if err != nil {
		spanExport.failed.Add(n)
		e.report.failed(n, err)
	} else {
		spanExport.exported.Add(n)
		e.report.exported()
	}
	return err
}

// exportReport logs the losses of one pipeline: a warning when spans are
// first lost and then at most every exportLogInterval while they still
// are, and a line when export works again. The drop path is the request
// path, so it takes no lock unless it logs.
type exportReport struct {
	logger *zap.Logger
	queue  int

	// lastDropLog is when a drop was last logged (Unix nanoseconds), and
	// droppedLogged the dropped count it reported.
	lastDropLog   atomic.Int64
	droppedLogged atomic.Int64

	mu sync.Mutex
	// failingSince is when the first export of the current outage failed
	// (zero while exports succeed); lastFailLog when one was last logged.
	failingSince, lastFailLog time.Time
	failedInOutage            int64
	// droppedAtOutage is the dropped count when the outage began, to
	// report what it cost.
	droppedAtOutage int64
}

func (r *exportReport) dropped() {
	now := time.Now().UnixNano()
	last := r.lastDropLog.Load()
	if now-last < int64(exportLogInterval) || !r.lastDropLog.CompareAndSwap(last, now) {
		return
	}
	total := spanExport.dropped.Load()
	since := total - r.droppedLogged.Swap(total)
	r.logger.Warn("trace export queue full: dropping spans until the exporter catches up; traffic is not affected",
		zap.Int64("dropped", since),
		zap.Int64("dropped_total", total),
		zap.Int("queue_size", r.queue))
}

func (r *exportReport) failed(n int64, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if r.failingSince.IsZero() {
		r.failingSince = now
		r.failedInOutage = 0
		r.droppedAtOutage = spanExport.dropped.Load()
	}
	r.failedInOutage += n
	if now.Sub(r.lastFailLog) < exportLogInterval {
		return
	}
	r.lastFailLog = now
	r.logger.Warn("trace export failed: spans lost; traffic is not affected",
		zap.Error(err),
		zap.Int64("spans", n),
		zap.Int64("failed_total", spanExport.failed.Load()),
		zap.Int64("dropped_total", spanExport.dropped.Load()))
}

func (r *exportReport) exported() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failingSince.IsZero() {
		return
	}
	r.logger.Info("trace export resumed",
		zap.Duration("outage", time.Since(r.failingSince)),
		zap.Int64("failed", r.failedInOutage),
		zap.Int64("dropped", spanExport.dropped.Load()-r.droppedAtOutage))
	r.failingSince, r.lastFailLog = time.Time{}, time.Time{}
}

// withValidUTF8 returns spans with every string made valid UTF-8. Model
// names, ids, error types and label values come from traffic, and OTLP's
// protobuf encoding refuses an invalid string, failing the export of the
// whole batch the span is in; each invalid byte sequence becomes U+FFFD
// instead. It runs on the exporter's goroutine, never on the request path,
// and allocates only for a span that needs fixing.
func withValidUTF8(spans []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for i, s := range spans {
		if spanIsValidUTF8(s) {
			if out != nil {
				out[i] = s
			}
			continue
		}
		if out == nil {
			out = make([]sdktrace.ReadOnlySpan, len(spans))
			copy(out, spans[:i])
		}
		out[i] = newValidSpan(s)
	}
	if out == nil {
		return spans
	}
	return out
}

func spanIsValidUTF8(s sdktrace.ReadOnlySpan) bool {
	if !utf8.ValidString(s.Name()) || !utf8.ValidString(s.Status().Description) || !attributesAreValidUTF8(s.Attributes()) {
		return false
	}
	for _, ev := range s.Events() {
		if !utf8.ValidString(ev.Name) || !attributesAreValidUTF8(ev.Attributes) {
			return false
		}
	}
	return true
}

func attributesAreValidUTF8(kvs []attribute.KeyValue) bool {
	for _, kv := range kvs {
		if !utf8.ValidString(string(kv.Key)) {
			return false
		}
		switch kv.Value.Type() {
		case attribute.STRING:
			if !utf8.ValidString(kv.Value.AsString()) {
				return false
			}
		case attribute.STRINGSLICE:
			for _, v := range kv.Value.AsStringSlice() {
				if !utf8.ValidString(v) {
					return false
				}
			}
		}
	}
	return true
}

// validSpan is a span with its strings made valid UTF-8; everything else
// is the original's.
type validSpan struct {
	sdktrace.ReadOnlySpan
	name   string
	attrs  []attribute.KeyValue
	events []sdktrace.Event
	status sdktrace.Status
}

func newValidSpan(s sdktrace.ReadOnlySpan) *validSpan {
	v := &validSpan{
		ReadOnlySpan: s,
		name:         validUTF8(s.Name()),
		attrs:        validAttributes(s.Attributes()),
		status:       s.Status(),
	}
	v.status.Description = validUTF8(v.status.Description)
	for _, ev := range s.Events() {
		ev.Name = validUTF8(ev.Name)
		ev.Attributes = validAttributes(ev.Attributes)
		v.events = append(v.events, ev)
	}
	return v
}

func validAttributes(kvs []attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, len(kvs))
	for i, kv := range kvs {
		key := attribute.Key(validUTF8(string(kv.Key)))
		switch kv.Value.Type() {
		case attribute.STRING:
			out[i] = key.String(validUTF8(kv.Value.AsString()))
		case attribute.STRINGSLICE:
			vs := kv.Value.AsStringSlice()
			for j := range vs {
				vs[j] = validUTF8(vs[j])
			}
			out[i] = key.StringSlice(vs)
		default:
			out[i] = attribute.KeyValue{Key: key, Value: kv.Value}
		}
	}
	return out
}

func (v *validSpan) Name() string                     { return v.name }
func (v *validSpan) Attributes() []attribute.KeyValue { return v.attrs }
func (v *validSpan) Events() []sdktrace.Event         { return v.events }
func (v *validSpan) Status() sdktrace.Status          { return v.status }
