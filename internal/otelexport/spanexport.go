package otelexport

import (
	"context"
	"expvar"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"
)

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

// ExportCounts is a snapshot of spanExport, for the admin API, the logs,
// the metrics and the tests.
type ExportCounts struct {
	Queued   int64 `json:"queued"`
	Exported int64 `json:"exported"`
	Dropped  int64 `json:"dropped"`
	Failed   int64 `json:"failed"`
}

// SpanExportCounts returns the process's span export counts so far.
func SpanExportCounts() ExportCounts {
	return ExportCounts{
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
	expvar.Publish("tokentap_span_export", expvar.Func(func() any { return SpanExportCounts() }))
}

// ExportLogInterval is the least time between two log lines about the same
// kind of loss, so a collector outage under load logs a line every few
// seconds with the counts, not one per span or batch. Tests shorten it.
var ExportLogInterval = 10 * time.Second

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
// first lost and then at most every ExportLogInterval while they still
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
	if now-last < int64(ExportLogInterval) || !r.lastDropLog.CompareAndSwap(last, now) {
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
	if now.Sub(r.lastFailLog) < ExportLogInterval {
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
