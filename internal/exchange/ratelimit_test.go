package exchange

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/tokentap/tokentap/internal/ratelimit"
	"github.com/tokentap/tokentap/internal/sink"
)

// resultSink keeps the last Result's rate limits and outcome.
type resultSink struct {
	rl      ratelimit.Headers
	outcome string
}

func (s *resultSink) Record(r *sink.Result) { s.rl, s.outcome = r.RateLimit, r.M.Outcome.String() }

// TestRateLimitHeaders: each provider's rate limit headers, as its
// upstream sends them, reach the Result and the span; the request's key
// headers are never read into either; a throttled answer is outcome
// throttled, an error span, with its retry-after.
func TestRateLimitHeaders(t *testing.T) {
	const secret = "sk-test-never-recorded"
	anthropicReset := time.Now().Add(20 * time.Second).UTC().Format(time.RFC3339)
	tests := []struct {
		name     string
		path     string
		status   int
		headers  map[string]string
		body     []byte
		ctype    string
		want     map[attribute.Key]attribute.Value
		outcome  string
		spanCode codes.Code
	}{
		{
			name: "openai", path: "/v1/chat/completions", status: 200,
			headers: map[string]string{
				"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "59", "x-ratelimit-reset-requests": "1s",
				"x-ratelimit-limit-tokens": "150000", "x-ratelimit-remaining-tokens": "149984", "x-ratelimit-reset-tokens": "6m0s"},
			body: fixture(t, "chat_usage.sse"), ctype: "text/event-stream",
			want: map[attribute.Key]attribute.Value{
				"tokentap.ratelimit.requests.limit":           attribute.Int64Value(60),
				"tokentap.ratelimit.requests.remaining_share": attribute.Float64Value(59.0 / 60),
				"tokentap.ratelimit.tokens.reset":             attribute.Float64Value(360),
			},
			outcome: "completed", spanCode: codes.Unset,
		},
		{
			name: "groq", path: "/openai/v1/chat/completions", status: 200,
			headers: map[string]string{
				"x-ratelimit-limit-requests": "14400", "x-ratelimit-remaining-requests": "14370", "x-ratelimit-reset-requests": "2m59.56s",
				"x-ratelimit-limit-tokens": "18000", "x-ratelimit-remaining-tokens": "17997", "x-ratelimit-reset-tokens": "7.66s"},
			body: fixture(t, "chat_usage.sse"), ctype: "text/event-stream",
			want: map[attribute.Key]attribute.Value{
				"tokentap.ratelimit.requests.remaining": attribute.Int64Value(14370),
				"tokentap.ratelimit.tokens.reset":       attribute.Float64Value(7.66),
			},
			outcome: "completed", spanCode: codes.Unset,
		},
		{
			name: "anthropic, overloaded mid-stream", path: "/v1/messages", status: 200,
			headers: map[string]string{
				"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "49", "anthropic-ratelimit-requests-reset": anthropicReset,
				"anthropic-ratelimit-input-tokens-limit": "40000", "anthropic-ratelimit-input-tokens-remaining": "10000", "anthropic-ratelimit-input-tokens-reset": anthropicReset,
				"anthropic-ratelimit-output-tokens-limit": "8000", "anthropic-ratelimit-output-tokens-remaining": "8000", "anthropic-ratelimit-output-tokens-reset": anthropicReset},
			body: fixture(t, "../../meter/testdata/anthropic/overloaded_midstream.sse"), ctype: "text/event-stream",
			want: map[attribute.Key]attribute.Value{
				"tokentap.ratelimit.requests.limit":               attribute.Int64Value(50),
				"tokentap.ratelimit.input_tokens.remaining_share": attribute.Float64Value(0.25),
				"tokentap.ratelimit.output_tokens.remaining":      attribute.Int64Value(8000),
				"error.type": attribute.StringValue("overloaded_error"),
			},
			outcome: "throttled", spanCode: codes.Error,
		},
		{
			name: "azure openai 429", path: "/openai/deployments/gpt-4o/chat/completions", status: 429,
			headers: map[string]string{
				"x-ratelimit-remaining-requests": "0", "x-ratelimit-remaining-tokens": "0",
				"retry-after": "37", "retry-after-ms": "36500"},
			body: fixture(t, "../../meter/testdata/openai/error_429.json"), ctype: "application/json",
			want: map[attribute.Key]attribute.Value{
				"tokentap.ratelimit.requests.remaining": attribute.Int64Value(0),
				"tokentap.ratelimit.retry_after":        attribute.Float64Value(36.5),
				"error.type":                            attribute.StringValue("429"),
			},
			outcome: "throttled", spanCode: codes.Error,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := &resultSink{}
			hs := newHarness(t, Config{Sinks: []Named{{Name: "result", Sink: res}}}, func(w http.ResponseWriter, r *http.Request) error {
				_, _ = io.Copy(io.Discard, r.Body)
				for k, v := range tt.headers {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", tt.ctype)
				w.WriteHeader(tt.status)
				_, _ = w.Write(tt.body)
				return nil
			})
			req, _ := http.NewRequest(http.MethodPost, hs.srv.URL+tt.path, strings.NewReader(`{"model":"m","stream":true}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+secret)
			req.Header.Set("x-api-key", secret)
			req.Header.Set("api-key", secret)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			s := hs.span(t)
			a := attrs(s)
			for k, v := range tt.want {
				if a[k] != v {
					t.Errorf("%s = %v, want %v", k, a[k].Emit(), v.Emit())
				}
			}
			if got := a[attrOutcome].AsString(); got != tt.outcome || res.outcome != tt.outcome {
				t.Errorf("outcome: span %s, result %s; want %s", got, res.outcome, tt.outcome)
			}
			if s.Status().Code != tt.spanCode {
				t.Errorf("span status %v, want %v", s.Status(), tt.spanCode)
			}
			if !res.rl.Known() {
				t.Error("the Result has no rate limits")
			}
			for k, v := range a {
				if strings.Contains(v.Emit(), secret) || strings.Contains(strings.ToLower(string(k)), "authorization") || strings.Contains(string(k), "api-key") {
					t.Errorf("the span records a key: %s = %s", k, v.Emit())
				}
			}
		})
	}
}
