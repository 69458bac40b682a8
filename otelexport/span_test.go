package otelexport

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tokentap/tokentap/internal/measuretest"
	"github.com/tokentap/tokentap/meter"
	"github.com/tokentap/tokentap/sink"
)

// recordedCohere is the meter's measurement of the real recorded Cohere
// text stream (meter/testdata/recorded/cohere/chat_text.sse), whose
// message-end says usage.tokens 507 in, 10 out (448 cached) and
// billed_units 12 in, 7 out.
func recordedCohere(t *testing.T) *meter.Measurement {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("..", "meter", "testdata", "recorded", "cohere", "chat_text.sse"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := meter.LookupDialect("cohere_chat")
	start := time.Now()
	mt := meter.New(info.New(), meter.Options{}, start)
	mt.Request("/v2/chat", []byte(`{"model":"command-a-03-2025","stream":true}`), false)
	mt.Response(200, "text/event-stream", "")
	mt.Write(body, start.Add(time.Second))
	return mt.Finish(start.Add(2*time.Second), meter.OutcomeUnknown, "")
}

// TestSpanBilledAttributes: tokentap.usage.billed_input_tokens and
// tokentap.usage.billed_output_tokens carry the counts a provider bills
// where it reports them (Cohere's billed_units), each only where
// reported, beside gen_ai.usage.*, which stay the processed counts.
func TestSpanBilledAttributes(t *testing.T) {
	partial := measuretest.Streamed()
	partial.Billed = meter.BilledUsage{InputTokens: 12, OutputTokens: -1}
	tests := []struct {
		name                string
		m                   *meter.Measurement
		input               int64 // gen_ai.usage.input_tokens
		billedIn, billedOut int64 // -1: absent
	}{
		{"recorded Cohere stream: billed beside processed", recordedCohere(t), 507, 12, 7},
		{"no billed counts: neither attribute", measuretest.Streamed(), 50, -1, -1},
		{"input billed alone: its attribute alone", partial, 50, 12, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			ctx, _ := tp.Tracer("test").Start(context.Background(), "chat")
			Spans{}.Record(&sink.Result{Ctx: ctx, M: tt.m, End: time.Now(), Provider: "cohere"})
			ended := rec.Ended()
			if len(ended) != 1 {
				t.Fatalf("%d spans ended, want 1", len(ended))
			}
			a := map[attribute.Key]attribute.Value{}
			for _, kv := range ended[0].Attributes() {
				a[kv.Key] = kv.Value
			}
			if got := a["gen_ai.usage.input_tokens"].AsInt64(); got != tt.input {
				t.Errorf("gen_ai.usage.input_tokens = %d, want %d", got, tt.input)
			}
			for _, c := range []struct {
				key  attribute.Key
				want int64
			}{{attrBilledInputTokens, tt.billedIn}, {attrBilledOutputTokens, tt.billedOut}} {
				v, ok := a[c.key]
				switch {
				case c.want < 0 && ok:
					t.Errorf("%s = %d, want absent", c.key, v.AsInt64())
				case c.want >= 0 && (!ok || v.AsInt64() != c.want):
					t.Errorf("%s = %v (set %v), want %d", c.key, v.Emit(), ok, c.want)
				}
			}
		})
	}
}
