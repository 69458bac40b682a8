package caddymodule

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap/zapcore"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/sink"
)

// encodeLogEntry renders e as the JSON access log would, as a generic map.
func encodeLogEntry(t *testing.T, e *logEntry) map[string]any {
	t.Helper()
	enc := zapcore.NewJSONEncoder(zapcore.EncoderConfig{})
	if err := e.MarshalLogObject(enc); err != nil {
		t.Fatal(err)
	}
	buf, err := enc.EncodeEntry(zapcore.Entry{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(buf.Bytes(), &out); err != nil {
		t.Fatalf("%v: %s", err, buf.Bytes())
	}
	return out
}

// TestLogEntryFields: the access log object carries what was observed, with
// the names docs/telemetry.md gives, and leaves out what was not (no zero
// time to first token, no count the provider did not report).
func TestLogEntryFields(t *testing.T) {
	traceID, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	spanID, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	spanCtx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: traceID, SpanID: spanID, TraceFlags: trace.FlagsSampled,
	}))
	unknown := meter.Usage{InputTokens: -1, OutputTokens: -1, CacheReadInputTokens: -1, CacheCreationInputTokens: -1, ReasoningOutputTokens: -1}

	tests := []struct {
		name string
		ctx  context.Context
		m    meter.Measurement
		want map[string]any
	}{
		{
			name: "streamed chat with reported usage and a span",
			ctx:  spanCtx,
			m: meter.Measurement{
				Dialect: "openai_chat", Operation: "chat",
				Request:       meter.Request{Model: "gpt-4o-mini", Stream: true, HasStream: true},
				ResponseModel: "gpt-4o-mini-2024-07-18", ResponseID: "chatcmpl-1",
				FirstToken: 250 * time.Millisecond, LastToken: 1250 * time.Millisecond,
				Usage: meter.Usage{InputTokens: 12, OutputTokens: 41, CacheReadInputTokens: 4,
					CacheCreationInputTokens: -1, ReasoningOutputTokens: 0, Source: meter.UsageReported},
				FinishReasons: []string{"stop"},
				Outcome:       meter.OutcomeCompleted,
			},
			want: map[string]any{
				"provider": "openai", "operation": "chat", "dialect": "openai_chat",
				"request_model": "gpt-4o-mini", "response_model": "gpt-4o-mini-2024-07-18",
				"response_id":  "chatcmpl-1",
				"input_tokens": 12.0, "output_tokens": 41.0, "cache_read_input_tokens": 4.0,
				"reasoning_output_tokens": 0.0, "usage_source": "reported",
				// (41-1) tokens over the 1 s from first to last.
				"time_to_first_token": 0.25, "output_tokens_per_second": 40.0,
				"outcome": "completed", "finish_reasons": []any{"stop"},
				"trace_id": traceID.String(), "span_id": spanID.String(),
			},
		},
		{
			name: "no token arrived: no time to first token, no rate",
			ctx:  context.Background(),
			m: meter.Measurement{
				Dialect: "anthropic_messages", Operation: "chat",
				Request: meter.Request{Model: "claude-sonnet-4-5"},
				Usage:   unknown, Outcome: meter.OutcomeUpstreamError, ErrorType: "overloaded_error",
			},
			want: map[string]any{
				"provider": "openai", "operation": "chat", "dialect": "anthropic_messages",
				"request_model": "claude-sonnet-4-5", "usage_source": "absent",
				"outcome": "upstream_error", "error_type": "overloaded_error",
			},
		},
		{
			name: "one output token, cut: time to first token but no rate, finish reason error",
			ctx:  context.Background(),
			m: meter.Measurement{
				Dialect: "openai_chat", Operation: "chat",
				FirstToken: 80 * time.Millisecond, LastToken: 80 * time.Millisecond,
				Usage:   meter.Usage{InputTokens: -1, OutputTokens: 1, CacheReadInputTokens: -1, CacheCreationInputTokens: -1, ReasoningOutputTokens: -1, Source: meter.UsageEstimated},
				Outcome: meter.OutcomeTruncated, ErrorType: "truncated",
			},
			want: map[string]any{
				"provider": "openai", "operation": "chat", "dialect": "openai_chat",
				"output_tokens": 1.0, "usage_source": "estimated",
				"time_to_first_token": 0.08, "finish_reasons": []any{"error"},
				"outcome": "truncated", "error_type": "truncated",
			},
		},
		{
			name: "the client left: unfinished choices have no reason",
			ctx:  context.Background(),
			m: meter.Measurement{
				Dialect: "openai_chat", Operation: "chat",
				Usage:         meter.Usage{InputTokens: 3, OutputTokens: 5, CacheReadInputTokens: -1, CacheCreationInputTokens: -1, ReasoningOutputTokens: -1, Source: meter.UsageInjected},
				FinishReasons: []string{"", "length"},
				Outcome:       meter.OutcomeClientAbort,
			},
			want: map[string]any{
				"provider": "openai", "operation": "chat", "dialect": "openai_chat",
				"input_tokens": 3.0, "output_tokens": 5.0, "usage_source": "injected",
				"outcome": "client_abort", "finish_reasons": []any{"length"},
			},
		},
		{
			name: "a choice that never finished while the next did: error in its slot",
			ctx:  context.Background(),
			m: meter.Measurement{
				Dialect: "openai_chat", Operation: "chat",
				Usage:         meter.Usage{InputTokens: 3, OutputTokens: 5, CacheReadInputTokens: -1, CacheCreationInputTokens: -1, ReasoningOutputTokens: -1, Source: meter.UsageReported},
				FinishReasons: []string{"", "stop"},
				Outcome:       meter.OutcomeUpstreamError, ErrorType: "server_error",
			},
			want: map[string]any{
				"provider": "openai", "operation": "chat", "dialect": "openai_chat",
				"input_tokens": 3.0, "output_tokens": 5.0, "usage_source": "reported",
				"outcome": "upstream_error", "error_type": "server_error", "finish_reasons": []any{"error", "stop"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.m
			got := encodeLogEntry(t, newLogEntry(&sink.Result{Ctx: tt.ctx, M: &m, Provider: "openai"}))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("access log object:\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}

// TestLogVarsMatchSpan runs the handler as Caddy does (PrepareRequest gives
// the request its variables and log fields) and checks that the published
// variables say what the span says, each under its documented name, and
// that unobserved values are not published.
func TestLogVarsMatchSpan(t *testing.T) {
	tests := []struct {
		name     string
		upstream func(t *testing.T) caddyhttp.HandlerFunc
		body     string
		// want maps each variable to the span attribute it must equal;
		// absent lists variables that must not be set.
		want   map[string]attribute.Key
		absent []string
	}{
		{
			name: "stream with reported usage",
			upstream: func(t *testing.T) caddyhttp.HandlerFunc {
				return streamUpstream(fixture(t, "chat_usage.sse"), []int{100, 700})
			},
			body: `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true}}`,
			want: map[string]attribute.Key{
				"provider": "gen_ai.provider.name", "operation": "gen_ai.operation.name",
				"dialect": attrDialect, "request_model": "gen_ai.request.model",
				"response_model": "gen_ai.response.model", "response_id": "gen_ai.response.id",
				"input_tokens": "gen_ai.usage.input_tokens", "output_tokens": "gen_ai.usage.output_tokens",
				"usage_source": attrUsageSource, "time_to_first_token": attrTimeToFirstToken,
				"output_tokens_per_second": attrOutputTokensPerSecond, "outcome": attrOutcome,
			},
			absent: []string{"error_type"},
		},
		{
			name: "error status: no tokens, no time to first token",
			upstream: func(t *testing.T) caddyhttp.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) error {
					_, _ = io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusTooManyRequests)
					_, _ = w.Write(fixture(t, "../../meter/testdata/openai/error_429.json"))
					return nil
				}
			},
			body: `{"model":"gpt-4o","stream":true}`,
			want: map[string]attribute.Key{
				"request_model": "gen_ai.request.model", "outcome": attrOutcome,
				"error_type": "error.type", "usage_source": attrUsageSource,
			},
			absent: []string{"input_tokens", "output_tokens", "time_to_first_token", "output_tokens_per_second", "response_model", "finish_reasons"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var repl *caddy.Replacer
			var vars map[string]any
			upstream := tt.upstream(t)
			hs := newHarness(t, &Handler{}, func(w http.ResponseWriter, r *http.Request) error {
				repl = r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
				vars = r.Context().Value(caddyhttp.VarsCtxKey).(map[string]any)
				// A value left by an earlier handler in the chain must
				// not survive this exchange.
				repl.Set(replPrefix+logTimeToFirstToken, 99.0)
				repl.Set(replPrefix+logErrorType, "stale")
				vars["unrelated"] = "kept"
				return upstream(w, r)
			})
			// Caddy answers every {http.vars.*} it has no value for with
			// nil: unset, as a directive using it sees it.
			get := func(name string) (any, bool) {
				v, _ := repl.Get(replPrefix + name)
				return v, v != nil
			}
			resp, err := http.Post(hs.srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			span := hs.span(t) // also waits for ServeHTTP to return
			a := attrs(span)
			for name, key := range tt.want {
				v, ok := get(name)
				if !ok {
					t.Errorf("{%s%s} is not set; the span has %s=%v", replPrefix, name, key, a[key].Emit())
					continue
				}
				if got, want := v, a[key].AsInterface(); got != want {
					t.Errorf("{%s%s} = %v (%T), span %s = %v (%T)", replPrefix, name, got, got, key, want, want)
				}
			}
			for _, name := range tt.absent {
				if v, ok := get(name); ok {
					t.Errorf("{%s%s} = %v, want it unset", replPrefix, name, v)
				}
			}
			if vars["unrelated"] != "kept" {
				t.Errorf("a variable of another module was changed: %v", vars["unrelated"])
			}
			sc := span.SpanContext()
			traceID, _ := get(logTraceID)
			spanID, _ := get(logSpanID)
			if traceID != sc.TraceID().String() || spanID != sc.SpanID().String() {
				t.Errorf("trace_id %v span_id %v, want the span's %s %s", traceID, spanID, sc.TraceID(), sc.SpanID())
			}
			if reasons := a["gen_ai.response.finish_reasons"].AsStringSlice(); len(reasons) > 0 {
				if got, _ := get(logFinishReasons); got != strings.Join(reasons, ",") {
					t.Errorf("finish_reasons %v, span %v", got, reasons)
				}
			}
		})
	}
}

// TestAccessLogged: the access log's tokentap object is built only for a
// server that writes an access log, or when the server is not known.
func TestAccessLogged(t *testing.T) {
	for _, tt := range []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"server with an access log", context.WithValue(context.Background(), caddyhttp.ServerCtxKey, &caddyhttp.Server{Logs: &caddyhttp.ServerLogConfig{}}), true},
		{"server without one", context.WithValue(context.Background(), caddyhttp.ServerCtxKey, &caddyhttp.Server{}), false},
		{"no server in the context", context.Background(), true},
		{"a nil server", context.WithValue(context.Background(), caddyhttp.ServerCtxKey, (*caddyhttp.Server)(nil)), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := accessLogged(tt.ctx); got != tt.want {
				t.Errorf("accessLogged = %v, want %v", got, tt.want)
			}
		})
	}
}
