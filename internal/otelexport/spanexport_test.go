package otelexport

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// blockingExporter holds every export until released, as an exporter
// stuck on an unreachable collector does.
type blockingExporter struct {
	release  chan struct{}
	exported atomic.Int64
}

func (e *blockingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
		e.exported.Add(int64(len(spans)))
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *blockingExporter) Shutdown(context.Context) error { return nil }

// TestBoundedBatcherCountsEverySpan: with the exporter stuck, ending spans
// never blocks, the queue never holds more than its bound, and every span
// is counted exactly once, as exported or dropped; the SDK's batch
// processor never drops one uncounted.
func TestBoundedBatcherCountsEverySpan(t *testing.T) {
	tests := []struct {
		name         string
		queue, batch int
		spans        int
	}{
		{"queue of 8, batches of 4", 8, 4, 200},
		{"queue of 1", 1, 1, 50},
		{"queue larger than the burst", 512, 64, 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exp := &blockingExporter{release: make(chan struct{})}
			before := SpanExportCounts()
			bb := newBoundedBatcher(exp, tt.queue, tt.batch, zap.NewNop())
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(bb))
			tracer := tp.Tracer("t")
			start := time.Now()
			var maxPending int64
			for i := 0; i < tt.spans; i++ {
				_, s := tracer.Start(context.Background(), "s")
				s.End()
				maxPending = max(maxPending, bb.pending.Load())
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("ending %d spans took %v with the exporter stuck: OnEnd must never wait for it", tt.spans, d)
			}
			if maxPending > int64(tt.queue) {
				t.Errorf("%d spans pending, over the queue bound %d", maxPending, tt.queue)
			}
			mid := SpanExportCounts()
			close(exp.release)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tp.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			after := SpanExportCounts()
			exported, dropped := after.Exported-before.Exported, after.Dropped-before.Dropped
			if exported != exp.exported.Load() {
				t.Errorf("counted %d exported, the exporter got %d", exported, exp.exported.Load())
			}
			if exported+dropped != int64(tt.spans) || after.Failed != before.Failed || after.Queued != before.Queued {
				t.Errorf("%d spans ended: %d exported + %d dropped, %d failed, %d still queued; want every span exported or dropped",
					tt.spans, exported, dropped, after.Failed-before.Failed, after.Queued-before.Queued)
			}
			if wantDrops := tt.spans > tt.queue+tt.batch; wantDrops != (dropped > 0) {
				t.Errorf("%d dropped with a queue of %d for %d spans", dropped, tt.queue, tt.spans)
			}
			// With drops, what gets through is the queue, plus at most
			// the one batch the stuck exporter had already taken from
			// it: 8 to 12 of 200 for a queue of 8 and batches of 4.
			if dropped > 0 && (exported < int64(tt.queue) || exported > int64(tt.queue+tt.batch)) {
				t.Errorf("%d exported once released, want the queue's %d plus at most one batch of %d", exported, tt.queue, tt.batch)
			}
			t.Logf("%d spans: %d dropped while the exporter was stuck (at most %d pending, %d queued then), %d exported after",
				tt.spans, mid.Dropped-before.Dropped, maxPending, mid.Queued-before.Queued, exported)
		})
	}
}

// TestBatchLimitsFromEnv: the queue and batch sizes come from the SDK's
// variables, and a value the SDK would silently ignore or crash on is a
// clear error.
func TestBatchLimitsFromEnv(t *testing.T) {
	tests := []struct {
		name         string
		queue, batch string
		wantQ, wantB int
		wantErr      string
	}{
		{"defaults", "", "", 2048, 512, ""},
		{"set", "100", "10", 100, 10, ""},
		{"batch capped by the queue", "16", "512", 16, 16, ""},
		{"negative queue", "-1", "", 0, 0, "OTEL_BSP_MAX_QUEUE_SIZE must be a positive integer"},
		{"zero batch", "", "0", 0, 0, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE must be a positive integer"},
		{"not a number", "lots", "", 0, 0, `got "lots"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", tt.queue)
			t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", tt.batch)
			q, b, err := batchLimits()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || q != tt.wantQ || b != tt.wantB {
				t.Errorf("queue %d batch %d err %v, want %d %d", q, b, err, tt.wantQ, tt.wantB)
			}
		})
	}
}

// TestWithValidUTF8: strings from traffic that are not valid UTF-8 are
// repaired before export, and valid spans pass as they are.
func TestWithValidUTF8(t *testing.T) {
	rec := &collectingExporter{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(rec))
	_, good := tp.Tracer("t").Start(context.Background(), "chat gpt-4o")
	good.SetAttributes(attribute.String("gen_ai.response.model", "gpt-4o"), attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop"}))
	good.End()
	_, bad := tp.Tracer("t").Start(context.Background(), "chat gpt-\xff")
	bad.SetAttributes(
		attribute.String("gen_ai.response.model", "gpt-\xc3\x28"),
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop", "\xe2\x82"}),
		attribute.Int("gen_ai.usage.output_tokens", 7))
	bad.AddEvent("ev\xff", trace.WithAttributes(attribute.String("k", "v\xff")))
	bad.End()
	spans := withValidUTF8(rec.spans)
	if spans[0] != rec.spans[0] {
		t.Error("a valid span was copied")
	}
	s := spans[1]
	if s.Name() != "chat gpt-\uFFFD" {
		t.Errorf("name %q", s.Name())
	}
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		got[kv.Key] = kv.Value
	}
	if got["gen_ai.response.model"].AsString() != "gpt-\uFFFD(" ||
		!slices.Equal(got["gen_ai.response.finish_reasons"].AsStringSlice(), []string{"stop", "\uFFFD"}) ||
		got["gen_ai.usage.output_tokens"].AsInt64() != 7 {
		t.Errorf("attributes %v", got)
	}
	if ev := s.Events(); len(ev) != 1 || ev[0].Name != "ev\uFFFD" || ev[0].Attributes[0].Value.AsString() != "v\uFFFD" {
		t.Errorf("events %v", ev)
	}
	if !s.SpanContext().Equal(rec.spans[1].SpanContext()) || s.EndTime() != rec.spans[1].EndTime() {
		t.Error("the repaired span lost its identity or times")
	}
}

type collectingExporter struct{ spans []sdktrace.ReadOnlySpan }

func (e *collectingExporter) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	e.spans = append(e.spans, s...)
	return nil
}
func (e *collectingExporter) Shutdown(context.Context) error { return nil }
