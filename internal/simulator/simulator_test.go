package simulator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// fast is a handler whose whole schedule fits in a few milliseconds, for
// tests about bytes rather than time.
func fast(t *testing.T, h Handler) *Handler {
	t.Helper()
	if h.TimeToFirstToken == 0 {
		h.TimeToFirstToken = caddy.Duration(time.Microsecond)
	}
	if h.TokensPerSecond == 0 {
		h.TokensPerSecond = 1e6
	}
	if err := h.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	return &h
}

const (
	streamBody      = `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Say something about speed."}]}`
	streamUsageBody = `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Say something about speed."}]}`
	plainBody       = `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Say something about speed."}]}]}`
)

func newRequest(method, path, body string, header map[string]string) *http.Request {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		r.Header.Set(k, v)
	}
	return r
}

// serve runs one request through h and returns the recorded response.
func serve(t *testing.T, h *Handler, r *http.Request) *http.Response {
	t.Helper()
	w := httptest.NewRecorder()
	if err := h.ServeHTTP(w, r, nil); err != nil {
		t.Fatalf("ServeHTTP returned %v", err)
	}
	return w.Result()
}

func readAll(t *testing.T, res *http.Response) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := b.ReadFrom(res.Body); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// events splits an SSE body into its data payloads, insisting on OpenAI's
// exact framing.
func events(t *testing.T, body []byte) []string {
	t.Helper()
	if len(body) == 0 {
		return nil
	}
	if !bytes.HasSuffix(body, []byte("\n\n")) {
		t.Fatalf("stream does not end with a blank line: %q", body)
	}
	var out []string
	for _, ev := range strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n") {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(data, "\n") {
			t.Fatalf("malformed event %q", ev)
		}
		out = append(out, data)
	}
	return out
}

type chunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Usage             json.RawMessage `json:"usage"`
	Choices           []struct {
		Index int `json:"index"`
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

func parseChunk(t *testing.T, data string) (chunk, map[string]json.RawMessage) {
	t.Helper()
	var c chunk
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		t.Fatalf("chunk %q: %v", data, err)
	}
	_ = json.Unmarshal([]byte(data), &raw)
	return c, raw
}

func TestModuleRegistersAndProvisions(t *testing.T) {
	info, err := caddy.GetModule("http.handlers.tokentap_simulator")
	if err != nil {
		t.Fatal(err)
	}
	h, ok := info.New().(*Handler)
	if !ok {
		t.Fatalf("module New returned %T, want *Handler", info.New())
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	if err := h.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	want := Profile{TimeToFirstToken: caddy.Duration(200 * time.Millisecond), TokensPerSecond: 50, OutputTokens: 64}
	if h.Profile != want || h.Usage != UsageAuto || h.Seed != 1 || h.FailStatusBody != StatusBodyJSON {
		t.Errorf("defaults not applied: %+v", h)
	}
	var cfg Handler
	if err := json.Unmarshal([]byte(`{"time_to_first_token":"150ms","tokens_per_second":40,"models":{"b":{"tokens_per_second":120}},"error_after":3}`), &cfg); err != nil {
		t.Fatal(err)
	}
	if time.Duration(cfg.TimeToFirstToken) != 150*time.Millisecond || cfg.TokensPerSecond != 40 ||
		cfg.Models["b"].TokensPerSecond != 120 || cfg.ErrorAfter == nil || *cfg.ErrorAfter != 3 {
		t.Errorf("JSON config decoded as %+v", cfg)
	}
}

func TestDeterministicBytes(t *testing.T) {
	h := fast(t, Handler{Profile: Profile{Jitter: 0.5}})
	for _, body := range []string{streamBody, streamUsageBody, plainBody} {
		first := readAll(t, serve(t, h, newRequest("POST", "/v1/chat/completions", body, nil)))
		second := readAll(t, serve(t, h, newRequest("POST", "/v1/chat/completions", body, nil)))
		if !bytes.Equal(first, second) {
			t.Errorf("two identical requests got different bytes:\n%s\n%s", first, second)
		}
	}

	// The text depends on the seed and the body, never on the timing.
	plan := func(h *Handler, body string) Plan {
		p, err := h.Plan([]byte(body), nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := plan(fast(t, Handler{}), streamBody)
	if jittered := plan(h, streamBody); !slices.Equal(base.Tokens, jittered.Tokens) {
		t.Error("jitter changed the text")
	}
	if slower := plan(&Handler{Profile: Profile{TokensPerSecond: 3}}, streamBody); !slices.Equal(base.Tokens, slower.Tokens) {
		t.Error("the rate changed the text")
	}
	if other := plan(fast(t, Handler{Seed: 2}), streamBody); slices.Equal(base.Tokens, other.Tokens) {
		t.Error("another seed gave the same text")
	}
	if usage := plan(fast(t, Handler{}), streamUsageBody); !slices.Equal(base.Tokens, usage.Tokens) || usage.ID != base.ID {
		t.Error("asking for usage changed the answer (inject_usage relies on it not changing)")
	}
	other := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Say something about slowness."}]}`
	if other := plan(fast(t, Handler{}), other); slices.Equal(base.Tokens, other.Tokens) || other.ID == base.ID {
		t.Error("another body gave the same text or id")
	}
	if !strings.HasPrefix(base.ID, "chatcmpl-sim") || len(base.ID) != len("chatcmpl-sim")+16 {
		t.Errorf("id %q", base.ID)
	}
}

func TestStreamShape(t *testing.T) {
	for _, tc := range []struct {
		name       string
		handler    Handler
		body       string
		header     map[string]string
		wantModel  string
		wantTokens int
		wantUsage  bool
		wantFinish string
	}{
		{name: "auto usage, not asked", body: streamBody, wantModel: "gpt-4o-mini", wantTokens: 64, wantFinish: "stop"},
		{name: "auto usage, asked", body: streamUsageBody, wantModel: "gpt-4o-mini", wantTokens: 64, wantUsage: true, wantFinish: "stop"},
		{name: "always usage", handler: Handler{Usage: UsageAlways}, body: streamBody, wantModel: "gpt-4o-mini", wantTokens: 64, wantUsage: true, wantFinish: "stop"},
		{name: "never usage though asked", handler: Handler{Usage: UsageNever}, body: streamUsageBody, wantModel: "gpt-4o-mini", wantTokens: 64, wantFinish: "stop"},
		{name: "usage header overrides config", handler: Handler{Usage: UsageNever}, body: streamBody, header: map[string]string{HeaderUsage: "always"}, wantModel: "gpt-4o-mini", wantTokens: 64, wantUsage: true, wantFinish: "stop"},
		{name: "default model", body: `{"stream":true,"messages":[{"role":"user","content":"hi"}]}`, wantModel: "tokentap-sim", wantTokens: 64, wantFinish: "stop"},
		{name: "max_tokens caps", body: `{"model":"m","stream":true,"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, wantModel: "m", wantTokens: 5, wantFinish: "length"},
		{name: "max_completion_tokens caps", body: `{"model":"m","stream":true,"max_completion_tokens":7,"max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`, wantModel: "m", wantTokens: 7, wantFinish: "length"},
		{name: "max_tokens above output", handler: Handler{Profile: Profile{OutputTokens: 10}}, body: `{"model":"m","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, wantModel: "m", wantTokens: 10, wantFinish: "stop"},
		{name: "model profile", handler: Handler{Models: map[string]Profile{"small": {OutputTokens: 3}}}, body: `{"model":"small","stream":true,"messages":[{"role":"user","content":"hi"}]}`, wantModel: "small", wantTokens: 3, wantFinish: "stop"},
		{name: "output tokens header", handler: Handler{Models: map[string]Profile{"small": {OutputTokens: 3}}}, header: map[string]string{HeaderOutputTokens: "12"}, body: `{"model":"small","stream":true,"messages":[{"role":"user","content":"hi"}]}`, wantModel: "small", wantTokens: 12, wantFinish: "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fast(t, tc.handler)
			r := newRequest("POST", "/v1/chat/completions", tc.body, tc.header)
			res := serve(t, h, r)
			body := readAll(t, res)
			if res.StatusCode != 200 {
				t.Fatalf("status %d: %s", res.StatusCode, body)
			}
			if ct := res.Header.Get("Content-Type"); ct != "text/event-stream; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			if cc := res.Header.Get("Cache-Control"); cc != "no-cache" {
				t.Errorf("Cache-Control %q", cc)
			}
			evs := events(t, body)
			want := 1 + tc.wantTokens + 1 + 1 // role, tokens, finish, [DONE]
			if tc.wantUsage {
				want++
			}
			if len(evs) != want {
				t.Fatalf("got %d events, want %d:\n%s", len(evs), want, body)
			}
			if evs[len(evs)-1] != "[DONE]" {
				t.Fatalf("last event %q", evs[len(evs)-1])
			}
			plan, err := h.Plan([]byte(tc.body), r.Header)
			if err != nil {
				t.Fatal(err)
			}
			var text strings.Builder
			for i, data := range evs[:len(evs)-1] {
				c, raw := parseChunk(t, data)
				if c.ID != plan.ID || c.Object != "chat.completion.chunk" || c.Created != created ||
					c.Model != tc.wantModel || c.SystemFingerprint != "fp_tokentap_sim" {
					t.Fatalf("event %d envelope: %s", i, data)
				}
				_, hasUsage := raw["usage"]
				if hasUsage != tc.wantUsage {
					t.Fatalf("event %d: usage key present %v, want %v: %s", i, hasUsage, tc.wantUsage, data)
				}
				isUsage := tc.wantUsage && i == len(evs)-2
				if isUsage {
					if len(c.Choices) != 0 {
						t.Fatalf("usage chunk has choices: %s", data)
					}
					var u usage
					if err := json.Unmarshal(c.Usage, &u); err != nil {
						t.Fatal(err)
					}
					if u != newUsage(plan.PromptTokens, tc.wantTokens) {
						t.Errorf("usage %+v", u)
					}
					continue
				}
				if hasUsage && string(c.Usage) != "null" {
					t.Fatalf("event %d: usage %s, want null", i, c.Usage)
				}
				if len(c.Choices) != 1 || c.Choices[0].Index != 0 {
					t.Fatalf("event %d choices: %s", i, data)
				}
				ch := c.Choices[0]
				switch {
				case i == 0:
					if ch.Delta.Role == nil || *ch.Delta.Role != "assistant" || ch.Delta.Content == nil || *ch.Delta.Content != "" || ch.FinishReason != nil {
						t.Fatalf("first event is not the role chunk: %s", data)
					}
				case i <= tc.wantTokens:
					if ch.Delta.Role != nil || ch.Delta.Content == nil || ch.FinishReason != nil {
						t.Fatalf("event %d is not a content chunk: %s", i, data)
					}
					if !slices.Contains(words[:], *ch.Delta.Content) {
						t.Fatalf("event %d carries %q, not one vocabulary token", i, *ch.Delta.Content)
					}
					text.WriteString(*ch.Delta.Content)
				default:
					if ch.Delta.Role != nil || ch.Delta.Content != nil || ch.FinishReason == nil || *ch.FinishReason != tc.wantFinish {
						t.Fatalf("event %d is not the finish chunk (%s): %s", i, tc.wantFinish, data)
					}
				}
			}
			if text.String() != plan.Text() {
				t.Errorf("streamed text differs from the plan")
			}
			if got := res.Trailer.Get(HeaderOutputTokens); got != strconv.Itoa(tc.wantTokens) {
				t.Errorf("output tokens trailer %q", got)
			}
		})
	}
}

func TestExactWireFormat(t *testing.T) {
	h := fast(t, Handler{Profile: Profile{OutputTokens: 2}})
	p, err := h.Plan([]byte(streamUsageBody), nil)
	if err != nil {
		t.Fatal(err)
	}
	env := `{"id":"` + p.ID + `","object":"chat.completion.chunk","created":1767225600,"model":"gpt-4o-mini","system_fingerprint":"fp_tokentap_sim","choices":[`
	want := "data: " + env + `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n" +
		"data: " + env + `{"index":0,"delta":{"content":"` + p.Tokens[0] + `"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n" +
		"data: " + env + `{"index":0,"delta":{"content":"` + p.Tokens[1] + `"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n" +
		"data: " + env + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}` + "\n\n" +
		"data: " + env + `],"usage":{"prompt_tokens":6,"completion_tokens":2,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}` + "\n\n" +
		"data: [DONE]\n\n"
	got := readAll(t, serve(t, h, newRequest("POST", "/v1/chat/completions", streamUsageBody, nil)))
	if string(got) != want {
		t.Errorf("stream bytes:\n%s\nwant:\n%s", got, want)
	}

	p, _ = h.Plan([]byte(plainBody), nil)
	want = `{"id":"` + p.ID + `","object":"chat.completion","created":1767225600,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"` + p.Text() + `","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}},"system_fingerprint":"fp_tokentap_sim"}`
	got = readAll(t, serve(t, h, newRequest("POST", "/v1/chat/completions", plainBody, nil)))
	if string(got) != want {
		t.Errorf("completion bytes:\n%s\nwant:\n%s", got, want)
	}
}

func TestCompletion(t *testing.T) {
	for _, tc := range []struct {
		name       string
		handler    Handler
		body       string
		wantUsage  bool
		wantTokens int
		wantFinish string
	}{
		{name: "auto usage", body: plainBody, wantUsage: true, wantTokens: 64, wantFinish: "stop"},
		{name: "never usage", handler: Handler{Usage: UsageNever}, body: plainBody, wantTokens: 64, wantFinish: "stop"},
		{name: "capped", body: `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`, wantUsage: true, wantTokens: 4, wantFinish: "length"},
		{name: "stream false", body: `{"model":"m","stream":false,"messages":[{"role":"user","content":"hi"}]}`, wantUsage: true, wantTokens: 64, wantFinish: "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fast(t, tc.handler)
			res := serve(t, h, newRequest("POST", "/chat/completions", tc.body, nil))
			body := readAll(t, res)
			if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
			}
			var c struct {
				ID      string `json:"id"`
				Object  string `json:"object"`
				Created int64  `json:"created"`
				Model   string `json:"model"`
				Choices []struct {
					Index   int `json:"index"`
					Message struct {
						Role    string          `json:"role"`
						Content string          `json:"content"`
						Refusal json.RawMessage `json:"refusal"`
					} `json:"message"`
					Logprobs     json.RawMessage `json:"logprobs"`
					FinishReason string          `json:"finish_reason"`
				} `json:"choices"`
				Usage             *usage `json:"usage"`
				SystemFingerprint string `json:"system_fingerprint"`
			}
			if err := json.Unmarshal(body, &c); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			plan, _ := h.Plan([]byte(tc.body), nil)
			if c.ID != plan.ID || c.Object != "chat.completion" || c.Created != created || c.SystemFingerprint != systemFingerprint || len(c.Choices) != 1 {
				t.Fatalf("envelope: %s", body)
			}
			ch := c.Choices[0]
			if ch.Message.Role != "assistant" || ch.Message.Content != plan.Text() || string(ch.Message.Refusal) != "null" ||
				string(ch.Logprobs) != "null" || ch.FinishReason != tc.wantFinish || len(plan.Tokens) != tc.wantTokens {
				t.Fatalf("choice: %s", body)
			}
			if (c.Usage != nil) != tc.wantUsage {
				t.Fatalf("usage present %v, want %v", c.Usage != nil, tc.wantUsage)
			}
			if tc.wantUsage && *c.Usage != newUsage(plan.PromptTokens, tc.wantTokens) {
				t.Errorf("usage %+v", *c.Usage)
			}
			if res.Trailer.Get(HeaderOutputTokens) != strconv.Itoa(tc.wantTokens) {
				t.Errorf("trailers %v", res.Trailer)
			}
		})
	}
}

func TestPromptTokens(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want int
	}{
		{name: "string contents", body: `{"messages":[{"role":"user","content":"12345678"},{"role":"assistant","content":"1234"}]}`, want: 3},
		{name: "content parts", body: `{"messages":[{"role":"user","content":[{"type":"text","text":"12345678"},{"type":"image_url","image_url":{"url":"x"}}]}]}`, want: 2},
		{name: "at least one", body: `{"messages":[{"role":"user","content":""}]}`, want: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := (&Handler{}).Plan([]byte(tc.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			if p.PromptTokens != tc.want {
				t.Errorf("prompt tokens %d, want %d", p.PromptTokens, tc.want)
			}
		})
	}
}

type apiErrorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func TestErrorResponses(t *testing.T) {
	for _, tc := range []struct {
		name        string
		handler     Handler
		method      string
		path        string
		body        string
		header      map[string]string
		wantStatus  int
		wantType    string
		wantCode    string // "" for null
		wantMessage string
		wantEmpty   bool
	}{
		{name: "unknown path", path: "/v1/completions", wantStatus: 404, wantType: "invalid_request_error", wantCode: "not_found", wantMessage: "POST /v1/completions"},
		{name: "GET", method: "GET", wantStatus: 405, wantType: "invalid_request_error", wantCode: "method_not_allowed", wantMessage: "use POST"},
		{name: "not JSON", body: `{"messages":`, wantStatus: 400, wantType: "invalid_request_error", wantMessage: "JSON body"},
		{name: "JSON array", body: `[]`, wantStatus: 400, wantType: "invalid_request_error", wantMessage: "JSON body"},
		{name: "no messages", body: `{"model":"m"}`, wantStatus: 400, wantType: "invalid_request_error", wantCode: "missing_required_parameter", wantMessage: "'messages'"},
		{name: "empty messages", body: `{"messages":[]}`, wantStatus: 400, wantType: "invalid_request_error", wantCode: "missing_required_parameter", wantMessage: "'messages'"},
		{name: "zero max_tokens", body: `{"max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, wantStatus: 400, wantType: "invalid_request_error", wantCode: "invalid_value", wantMessage: "'max_tokens'"},
		{name: "fractional max_completion_tokens", body: `{"max_completion_tokens":2.5,"messages":[{"role":"user","content":"hi"}]}`, wantStatus: 400, wantType: "invalid_request_error", wantCode: "invalid_value", wantMessage: "'max_completion_tokens'"},
		{name: "status 429", header: map[string]string{HeaderStatus: "429"}, wantStatus: 429, wantType: "requests", wantCode: "rate_limit_exceeded", wantMessage: "Rate limit"},
		{name: "status 503", header: map[string]string{HeaderStatus: "503"}, wantStatus: 503, wantType: "server_error", wantMessage: "Service Unavailable"},
		{name: "status 400", header: map[string]string{HeaderStatus: "400"}, wantStatus: 400, wantType: "invalid_request_error", wantMessage: "Bad Request"},
		{name: "status without body", header: map[string]string{HeaderStatus: "500", HeaderStatusBody: "none"}, wantStatus: 500, wantEmpty: true},
		{name: "configured status", handler: Handler{FailStatus: 502}, wantStatus: 502, wantType: "server_error"},
		{name: "configured status, no body", handler: Handler{FailStatus: 429, FailStatusBody: StatusBodyNone}, wantStatus: 429, wantEmpty: true},
		{name: "header status overrides config", handler: Handler{FailStatus: 502}, header: map[string]string{HeaderStatus: "429"}, wantStatus: 429, wantType: "requests", wantCode: "rate_limit_exceeded"},
		{name: "status before body check", body: `nope`, header: map[string]string{HeaderStatus: "429"}, wantStatus: 429, wantType: "requests", wantCode: "rate_limit_exceeded"},
		{name: "bad status header", header: map[string]string{HeaderStatus: "200"}, wantStatus: 400, wantType: "invalid_request_error", wantCode: "invalid_header", wantMessage: HeaderStatus},
		{name: "bad status body header", header: map[string]string{HeaderStatusBody: "xml"}, wantStatus: 400, wantType: "invalid_request_error", wantCode: "invalid_header", wantMessage: HeaderStatusBody},
		{name: "bad ttft header", header: map[string]string{HeaderTimeToFirstToken: "100"}, wantStatus: 400, wantType: "invalid_request_error", wantCode: "invalid_header", wantMessage: HeaderTimeToFirstToken},
		{name: "negative ttft header", header: map[string]string{HeaderTimeToFirstToken: "-1ms"}, wantStatus: 400, wantType: "invalid_request_error", wantCode: "invalid_header", wantMessage: HeaderTimeToFirstToken},
		{name: "bad rate header", header: map[string]string{HeaderTokensPerSecond: "0"}, wantStatus: 400, wantType: "invalid_request_error", wantCode: "invalid_header", wantMessage: HeaderTokensPerSecond},
		{name: "bad output header", header: map[string]string{HeaderOutputTokens: "lots"}, wantStatus: 400, wantType: "invalid_request_error", wantCode: "invalid_header", wantMessage: HeaderOutputTokens},
		{name: "bad jitter header", header: map[string]string{HeaderJitter: "1.5"}, wantStatus: 400, wantType: "invalid_request_error", wantCode: "invalid_header", wantMessage: HeaderJitter},
		{name: "bad usage header", header: map[string]string{HeaderUsage: "yes"}, wantStatus: 400, wantType: "invalid_request_error", wantCode: "invalid_header", wantMessage: HeaderUsage},
		{name: "bad error-after header", header: map[string]string{HeaderErrorAfter: "-1"}, wantStatus: 400, wantType: "invalid_request_error", wantCode: "invalid_header", wantMessage: HeaderErrorAfter},
		{name: "bad truncate-after header", header: map[string]string{HeaderTruncateAfter: "x"}, wantStatus: 400, wantType: "invalid_request_error", wantCode: "invalid_header", wantMessage: HeaderTruncateAfter},
		{name: "bad abort-after header", header: map[string]string{HeaderAbortAfter: "1.5"}, wantStatus: 400, wantType: "invalid_request_error", wantCode: "invalid_header", wantMessage: HeaderAbortAfter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method, path, body := tc.method, tc.path, tc.body
			if method == "" {
				method = "POST"
			}
			if path == "" {
				path = "/v1/chat/completions"
			}
			if body == "" {
				body = streamBody
			}
			res := serve(t, fast(t, tc.handler), newRequest(method, path, body, tc.header))
			got := readAll(t, res)
			if res.StatusCode != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.wantStatus, got)
			}
			if tc.wantEmpty {
				if len(got) != 0 {
					t.Fatalf("body %q, want none", got)
				}
				return
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var e apiErrorBody
			if err := json.Unmarshal(got, &e); err != nil {
				t.Fatalf("%v: %s", err, got)
			}
			code := ""
			if e.Error.Code != nil {
				code = *e.Error.Code
			}
			if e.Error.Type != tc.wantType || code != tc.wantCode || !strings.Contains(e.Error.Message, tc.wantMessage) {
				t.Errorf("error %s, want type %q code %q message containing %q", got, tc.wantType, tc.wantCode, tc.wantMessage)
			}
			if !bytes.Contains(got, []byte(`"param":`)) || !bytes.Contains(got, []byte(`"code":`)) {
				t.Errorf("error lacks the param or code key: %s", got)
			}
		})
	}
}

func TestStreamFaults(t *testing.T) {
	const n = 10
	for _, tc := range []struct {
		name       string
		handler    Handler
		header     map[string]string
		wantTokens int
		wantLast   string // the last event's data; "" when the stream just stops
		wantAbort  bool
	}{
		{name: "error after 3", header: map[string]string{HeaderErrorAfter: "3"}, wantTokens: 3, wantLast: string(midStreamErr[6 : len(midStreamErr)-2])},
		{name: "error before first token", header: map[string]string{HeaderErrorAfter: "0"}, wantTokens: 0, wantLast: string(midStreamErr[6 : len(midStreamErr)-2])},
		{name: "error after the end", handler: Handler{ErrorAfter: intp(50)}, wantTokens: n, wantLast: string(midStreamErr[6 : len(midStreamErr)-2])},
		{name: "truncate after 4", header: map[string]string{HeaderTruncateAfter: "4"}, wantTokens: 4},
		{name: "configured truncate", handler: Handler{TruncateAfter: intp(6)}, wantTokens: 6},
		{name: "header overrides configured fault", handler: Handler{TruncateAfter: intp(2)}, header: map[string]string{HeaderTruncateAfter: "7"}, wantTokens: 7},
		{name: "earliest fault wins", handler: Handler{ErrorAfter: intp(5)}, header: map[string]string{HeaderTruncateAfter: "2"}, wantTokens: 2},
		{name: "abort after 2", header: map[string]string{HeaderAbortAfter: "2"}, wantTokens: 2, wantAbort: true},
		{name: "configured abort", handler: Handler{AbortAfter: intp(0)}, wantTokens: 0, wantAbort: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.handler.OutputTokens = n
			h := fast(t, tc.handler)
			w := httptest.NewRecorder()
			r := newRequest("POST", "/v1/chat/completions", streamUsageBody, tc.header)
			aborted := func() (aborted bool) {
				defer func() {
					if v := recover(); v != nil {
						if v != http.ErrAbortHandler {
							panic(v)
						}
						aborted = true
					}
				}()
				if err := h.ServeHTTP(w, r, nil); err != nil {
					t.Fatal(err)
				}
				return false
			}()
			if aborted != tc.wantAbort {
				t.Fatalf("aborted %v, want %v", aborted, tc.wantAbort)
			}
			evs := events(t, w.Body.Bytes())
			if slices.Contains(evs, "[DONE]") {
				t.Fatal("a failed stream sent [DONE]")
			}
			content := 0
			for _, data := range evs[1:] {
				if strings.Contains(data, `"finish_reason":"`) || strings.Contains(data, `"choices":[]`) {
					t.Fatalf("a failed stream sent %s", data)
				}
				if strings.Contains(data, `"delta":{"content":`) {
					content++
				}
			}
			if content != tc.wantTokens {
				t.Errorf("%d content chunks, want %d", content, tc.wantTokens)
			}
			last := evs[len(evs)-1]
			switch {
			case tc.wantLast != "":
				if last != tc.wantLast {
					t.Errorf("last event %s, want %s", last, tc.wantLast)
				}
				var e apiErrorBody
				if err := json.Unmarshal([]byte(last), &e); err != nil || e.Error.Type != "server_error" {
					t.Errorf("error event %s: %v", last, err)
				}
			case !strings.HasPrefix(last, `{"id"`):
				t.Errorf("unexpected last event %s", last)
			}
			if !tc.wantAbort {
				if got := w.Result().Trailer.Get(HeaderOutputTokens); got != strconv.Itoa(tc.wantTokens) {
					t.Errorf("output tokens trailer %q, want %d", got, tc.wantTokens)
				}
			}
			plan, _ := h.Plan([]byte(streamUsageBody), r.Header)
			if plan.Sent() != tc.wantTokens {
				t.Errorf("plan sends %d tokens, want %d", plan.Sent(), tc.wantTokens)
			}
		})
	}
}

func TestCompletionFaults(t *testing.T) {
	h := fast(t, Handler{Profile: Profile{OutputTokens: 10}})
	plan, _ := h.Plan([]byte(plainBody), nil)

	res := serve(t, h, newRequest("POST", "/v1/chat/completions", plainBody, map[string]string{HeaderErrorAfter: "3"}))
	if got := readAll(t, res); res.StatusCode != 500 || !bytes.Contains(got, []byte(`"type":"server_error"`)) {
		t.Errorf("error fault: %d %s", res.StatusCode, got)
	}

	res = serve(t, h, newRequest("POST", "/v1/chat/completions", plainBody, map[string]string{HeaderTruncateAfter: "3"}))
	got := readAll(t, res)
	if res.StatusCode != 200 || json.Valid(got) || !bytes.HasSuffix(got, []byte(plan.Tokens[0]+plan.Tokens[1]+plan.Tokens[2])) {
		t.Errorf("truncate fault: %d %s", res.StatusCode, got)
	}

	defer func() {
		if v := recover(); v != http.ErrAbortHandler {
			t.Errorf("abort fault recovered %v", v)
		}
	}()
	h.ServeHTTP(httptest.NewRecorder(), newRequest("POST", "/v1/chat/completions", plainBody, map[string]string{HeaderAbortAfter: "3"}), nil)
	t.Error("abort fault did not panic")
}

func TestPlan(t *testing.T) {
	h := &Handler{
		Profile: Profile{TimeToFirstToken: caddy.Duration(100 * time.Millisecond), TokensPerSecond: 50},
		Models:  map[string]Profile{"b": {TokensPerSecond: 100, OutputTokens: 11}},
	}
	p, err := h.Plan([]byte(`{"model":"b","messages":[{"role":"user","content":"x"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tokens) != 11 || len(p.Offsets) != 11 || p.Sent() != 11 {
		t.Fatalf("plan of %d tokens, %d offsets", len(p.Tokens), len(p.Offsets))
	}
	for i, off := range p.Offsets {
		if want := 100*time.Millisecond + time.Duration(i)*10*time.Millisecond; off != want {
			t.Errorf("offset %d = %v, want %v", i, off, want)
		}
	}
	if p.TimeToFirstToken() != 100*time.Millisecond || p.LastToken() != 200*time.Millisecond || p.DecodeRate() != 100 {
		t.Errorf("ttft %v, last %v, rate %v", p.TimeToFirstToken(), p.LastToken(), p.DecodeRate())
	}

	hdr := http.Header{}
	hdr.Set(HeaderTimeToFirstToken, "0s")
	hdr.Set(HeaderTokensPerSecond, "20")
	hdr.Set(HeaderJitter, "0.3")
	p, err = h.Plan([]byte(`{"model":"b","messages":[{"role":"user","content":"x"}]}`), hdr)
	if err != nil {
		t.Fatal(err)
	}
	if p.Profile != (Profile{TokensPerSecond: 20, Jitter: 0.3, OutputTokens: 11}) || p.Offsets[0] != 0 {
		t.Errorf("headers did not override: %+v, first offset %v", p.Profile, p.Offsets[0])
	}
	for i := 1; i < len(p.Offsets); i++ {
		if d := p.Offsets[i] - p.Offsets[i-1]; d < 35*time.Millisecond || d > 65*time.Millisecond {
			t.Errorf("interval %d = %v, outside 50ms ± 30%%", i, d)
		}
	}

	if _, err := h.Plan([]byte(`{}`), nil); err == nil {
		t.Error("no error for a body without messages")
	}
	hdr = http.Header{}
	hdr.Set(HeaderJitter, "x")
	_, err = h.Plan([]byte(streamBody), hdr)
	if err == nil || !strings.Contains(err.Error(), HeaderJitter) {
		t.Errorf("bad header error %v", err)
	}
	if _, ok := errors.AsType[*apiError](err); !ok {
		t.Errorf("bad header error is %T, not an OpenAI-style error", err)
	}
}
