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

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/testutil/measuretest"
)

// recordedCohere is the meter's measurement of the real recorded Cohere
// text stream (internal/meter/testdata/recorded/cohere/chat_text.sse), whose
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

// recordedAdvisor is the meter's measurement of the real recorded
// Anthropic advisor stream (internal/meter/testdata/recorded/anthropic/advisor.sse):
// claude-sonnet-4-6's top-level 4727 in and 3391 out, and an
// advisor_message iteration of claude-opus-4-7, 2728 in and 3880 out,
// nothing cached.
func recordedAdvisor(t *testing.T) *meter.Measurement {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("..", "meter", "testdata", "recorded", "anthropic", "advisor.sse"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := meter.LookupDialect("anthropic_messages")
	start := time.Now()
	mt := meter.New(info.New(), meter.Options{}, start)
	mt.Request("/v1/messages", []byte(`{"model":"claude-sonnet-4-6","stream":true}`), false)
	mt.Response(200, "text/event-stream", "")
	mt.Write(body, start.Add(time.Second))
	return mt.Finish(start.Add(2*time.Second), meter.OutcomeUnknown, "")
}

// TestSpanOtherModelAttributes: gen_ai.usage.* are the response model's
// own counts, and another model's usage inside the exchange (the
// advisor's) is in the tokentap.usage.other.* arrays, one element per
// model, the cache arrays only where every element reports its count.
func TestSpanOtherModelAttributes(t *testing.T) {
	// Spelled out rather than taken from attributes.go, so that renaming
	// one there fails here: dashboards depend on the names.
	const (
		keyModel         = attribute.Key("tokentap.usage.other.model")
		keyKind          = attribute.Key("tokentap.usage.other.kind")
		keyInput         = attribute.Key("tokentap.usage.other.input_tokens")
		keyOutput        = attribute.Key("tokentap.usage.other.output_tokens")
		keyCacheRead     = attribute.Key("tokentap.usage.other.cache_read.input_tokens")
		keyCacheCreation = attribute.Key("tokentap.usage.other.cache_creation.input_tokens")
	)
	two := measuretest.Streamed()
	two.OtherModels[0] = meter.ModelUsage{Model: "claude-opus-4-7", Kind: "advisor_message", InputTokens: 30, OutputTokens: 400, CacheReadInputTokens: 6, CacheCreationInputTokens: -1}
	two.OtherModels[1] = meter.ModelUsage{Model: "claude-opus-4-8", Kind: "advisor_message", InputTokens: 1, OutputTokens: 2, CacheReadInputTokens: 0, CacheCreationInputTokens: 0}
	two.NumOtherModels = 2
	tests := []struct {
		name          string
		m             *meter.Measurement
		input, output int64 // gen_ai.usage.*
		// want is the arrays expected, by key; a key not in it must be
		// absent.
		want map[attribute.Key]attribute.Value
	}{
		{"recorded advisor stream: the executor's counts, the advisor's beside them", recordedAdvisor(t), 4727, 3391, map[attribute.Key]attribute.Value{
			keyModel:         attribute.StringSliceValue([]string{"claude-opus-4-7"}),
			keyKind:          attribute.StringSliceValue([]string{"advisor_message"}),
			keyInput:         attribute.Int64SliceValue([]int64{2728}),
			keyOutput:        attribute.Int64SliceValue([]int64{3880}),
			keyCacheRead:     attribute.Int64SliceValue([]int64{0}),
			keyCacheCreation: attribute.Int64SliceValue([]int64{0}),
		}},
		{"two models, one cache-write count unreported: no cache-write array", two, 50, 101, map[attribute.Key]attribute.Value{
			keyModel:     attribute.StringSliceValue([]string{"claude-opus-4-7", "claude-opus-4-8"}),
			keyKind:      attribute.StringSliceValue([]string{"advisor_message", "advisor_message"}),
			keyInput:     attribute.Int64SliceValue([]int64{30, 1}),
			keyOutput:    attribute.Int64SliceValue([]int64{400, 2}),
			keyCacheRead: attribute.Int64SliceValue([]int64{6, 0}),
		}},
		{"no other model: no array", measuretest.Streamed(), 50, 101, nil},
	}
	keys := []attribute.Key{keyModel, keyKind, keyInput, keyOutput, keyCacheRead, keyCacheCreation}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			ctx, _ := tp.Tracer("test").Start(context.Background(), "chat")
			Spans{}.Record(&sink.Result{Ctx: ctx, M: tt.m, End: time.Now(), Provider: "anthropic"})
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
			if got := a["gen_ai.usage.output_tokens"].AsInt64(); got != tt.output {
				t.Errorf("gen_ai.usage.output_tokens = %d, want %d", got, tt.output)
			}
			for _, k := range keys {
				got, ok := a[k]
				want, wantOK := tt.want[k]
				if ok != wantOK || ok && got.Emit() != want.Emit() {
					t.Errorf("%s = %s (set %v), want %s (set %v)", k, got.Emit(), ok, want.Emit(), wantOK)
				}
			}
		})
	}
}
