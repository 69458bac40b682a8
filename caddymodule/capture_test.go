package caddymodule

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/tokentap/tokentap/internal/capture"
	"github.com/tokentap/tokentap/internal/exchange"
)

// captureRequest is a chat request with a system message and a question.
const captureRequest = `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say hello."}]}`

const (
	wantCapturedInput = `[{"role":"system","parts":[{"type":"text","content":"Be brief."}]},{"role":"user","parts":[{"type":"text","content":"Say hello."}]}]`
	// chat_usage.sse's text and finish reason.
	wantCapturedOutput = `[{"role":"assistant","parts":[{"type":"text","content":"Hello! How can I help you today?"}],"finish_reason":"stop"}]`
)

// postHeader posts a chat request with extra headers.
func postHeader(t *testing.T, url, body string, header map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestCaptureContent runs exchanges through the handler with capture on,
// off, and turned off by the request, and checks the span's content
// attributes, that the client's bytes are untouched, and that the
// per-request header never reaches the upstream.
func TestCaptureContent(t *testing.T) {
	body := fixture(t, "chat_usage.sse")
	tests := []struct {
		name    string
		capture *bool
		header  map[string]string
		// wantInput and wantOutput are "" when nothing may be captured.
		wantInput, wantOutput string
	}{
		{name: "on", capture: new(true), wantInput: wantCapturedInput, wantOutput: wantCapturedOutput},
		{name: "off by default", capture: nil},
		{name: "off by configuration", capture: new(false)},
		{name: "on, turned off by the request", capture: new(true), header: map[string]string{"Tokentap-Capture-Content": "off"}},
		{name: "on, header in other words", capture: new(true), header: map[string]string{"Tokentap-Capture-Content": " FALSE "}},
		{name: "on, header that is not off", capture: new(true), header: map[string]string{"Tokentap-Capture-Content": "please"},
			wantInput: wantCapturedInput, wantOutput: wantCapturedOutput},
		{name: "off, the header still does not go upstream", capture: nil, header: map[string]string{"Tokentap-Capture-Content": "off"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(captureEnv, "")
			var upstreamHeader []string
			var upstreamBody []byte
			hs := newHarness(t, &Handler{CaptureContent: tt.capture}, func(w http.ResponseWriter, r *http.Request) error {
				upstreamHeader = r.Header.Values(exchange.CaptureHeader)
				upstreamBody, _ = io.ReadAll(r.Body)
				return streamUpstream(body, []int{50, 700})(w, r)
			})
			resp := postHeader(t, hs.srv.URL, captureRequest, tt.header)
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			a := attrs(hs.span(t))
			if sha256.Sum256(got) != sha256.Sum256(body) {
				t.Error("the client's bytes differ from the upstream's")
			}
			if string(upstreamBody) != captureRequest {
				t.Errorf("upstream got body %q", upstreamBody)
			}
			if len(upstreamHeader) != 0 {
				t.Errorf("upstream got %s: %q", exchange.CaptureHeader, upstreamHeader)
			}
			if got := a[semconv.GenAIInputMessagesKey].AsString(); got != tt.wantInput {
				t.Errorf("input messages:\n got %s\nwant %s", got, tt.wantInput)
			}
			if got := a[semconv.GenAIOutputMessagesKey].AsString(); got != tt.wantOutput {
				t.Errorf("output messages:\n got %s\nwant %s", got, tt.wantOutput)
			}
			if _, ok := a[semconv.GenAISystemInstructionsKey]; ok {
				t.Error("OpenAI chat has no separate system instructions")
			}
			if _, ok := a[attrContentTruncated]; ok {
				t.Error("nothing was cut, but the span says so")
			}
		})
	}
}

// TestCaptureContentBounded: with a small max_content_size each attribute
// stays within it as valid JSON, and the span says content was cut.
func TestCaptureContentBounded(t *testing.T) {
	t.Setenv(captureEnv, "")
	long := strings.Repeat("Tell me more about that. ", 200)
	req := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"` + long + `"}]}`
	hs := newHarness(t, &Handler{CaptureContent: new(true), MaxContentSize: 300}, streamUpstream(fixture(t, "chat_usage.sse"), nil))
	resp := postHeader(t, hs.srv.URL, req, nil)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	a := attrs(hs.span(t))
	in := a[semconv.GenAIInputMessagesKey].AsString()
	if len(in) == 0 || len(in) > 300 || !json.Valid([]byte(in)) || !strings.Contains(in, "…") {
		t.Errorf("input messages (%d bytes): %s", len(in), in)
	}
	if out := a[semconv.GenAIOutputMessagesKey].AsString(); out != wantCapturedOutput {
		t.Errorf("output messages: %s", out)
	}
	if !a[attrContentTruncated].AsBool() {
		t.Error("tokentap.content.truncated is not set")
	}
}

// TestCaptureContentCompressed: a gzip-compressed stream is read on the
// meter's decompressing goroutine; its text is captured all the same (and
// the race detector checks the hand-over).
func TestCaptureContentCompressed(t *testing.T) {
	t.Setenv(captureEnv, "")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(fixture(t, "chat_usage.sse"))
	_ = zw.Close()
	compressed := gz.Bytes()
	hs := newHarness(t, &Handler{CaptureContent: new(true)}, func(w http.ResponseWriter, r *http.Request) error {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Encoding", "gzip")
		for i := 0; i < len(compressed); i += 64 {
			_, _ = w.Write(compressed[i:min(i+64, len(compressed))])
			_ = http.NewResponseController(w).Flush()
		}
		return nil
	})
	req, _ := http.NewRequest("POST", hs.srv.URL+"/v1/chat/completions", strings.NewReader(captureRequest))
	// Ask for the compressed bytes as they are, as an SDK would.
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, compressed) {
		t.Error("the client's compressed bytes differ")
	}
	a := attrs(hs.span(t))
	if out := a[semconv.GenAIOutputMessagesKey].AsString(); out != wantCapturedOutput {
		t.Errorf("output messages: %s", out)
	}
}

// TestCaptureContentBody: a non-streamed answer is captured from its body,
// and an error answer has no output messages.
func TestCaptureContentBody(t *testing.T) {
	t.Setenv(captureEnv, "")
	tests := []struct {
		name, body string
		status     int
		wantOutput string
	}{
		{"completion", `{"id":"c1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hi there."},"finish_reason":"stop"}]}`,
			200, `[{"role":"assistant","parts":[{"type":"text","content":"Hi there."}],"finish_reason":"stop"}]`},
		{"error status", `{"error":{"type":"rate_limit_exceeded","message":"slow down"}}`, 429, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := newHarness(t, &Handler{CaptureContent: new(true)}, func(w http.ResponseWriter, r *http.Request) error {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
				return nil
			})
			resp := postHeader(t, hs.srv.URL, strings.Replace(captureRequest, `"stream":true`, `"stream":false`, 1), nil)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			a := attrs(hs.span(t))
			if got := a[semconv.GenAIOutputMessagesKey].AsString(); got != tt.wantOutput {
				t.Errorf("output messages:\n got %s\nwant %s", got, tt.wantOutput)
			}
			if got := a[semconv.GenAIInputMessagesKey].AsString(); got != wantCapturedInput {
				t.Errorf("input messages: %s", got)
			}
		})
	}
}

// TestCaptureSwitch pins the precedence: the configuration's
// capture_content, when given, wins over the environment variable; without
// it the variable decides; unknown and event-only values leave capture
// off.
func TestCaptureSwitch(t *testing.T) {
	tests := []struct {
		name    string
		config  *bool
		env     string
		want    bool
		wantErr string
		size    int64
	}{
		{name: "default", want: false},
		{name: "SPAN_ONLY", env: "SPAN_ONLY", want: true},
		{name: "span_and_event", env: "span_and_event", want: true},
		{name: "true", env: "true", want: true},
		{name: "NO_CONTENT", env: "NO_CONTENT", want: false},
		{name: "false", env: "false", want: false},
		{name: "EVENT_ONLY records no span content", env: "EVENT_ONLY", want: false},
		{name: "unknown value", env: "yes please", want: false},
		{name: "configured off beats the environment", config: new(false), env: "SPAN_ONLY", want: false},
		{name: "configured on beats the environment", config: new(true), env: "NO_CONTENT", want: true},
		{name: "size too small", config: new(true), size: 100, wantErr: "max_content_size must be at least 256 bytes"},
		{name: "negative size", size: -1, wantErr: "max_content_size must be at least 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(captureEnv, tt.env)
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			defer cancel()
			h := &Handler{CaptureContent: tt.config, MaxContentSize: tt.size}
			err := h.Provision(ctx)
			defer h.Cleanup()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Provision() = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.cfg.Capture != tt.want {
				t.Errorf("capture %v, want %v", h.cfg.Capture, tt.want)
			}
			if h.MaxContentSize != capture.DefaultMaxSize {
				t.Errorf("max_content_size %d, want the default", h.MaxContentSize)
			}
		})
	}
}
