package simulator

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// transcript is what a per-format reader makes of a response: the facts
// every format has, in one shape, so that one table can check them all.
// The readers themselves insist on each format's exact framing and event
// order, and fail the test on any deviation.
type transcript struct {
	events  int    // content events, one per token; -1 for a body
	text    string // the output text
	input   int    // reported input tokens; -1 when absent
	output  int    // last reported output tokens; -1 when absent
	finish  string // finish reason in the format's words; "" when absent
	done    bool   // the format's normal end arrived
	errType string // the mid-stream error's type; "" when none
}

func newTranscript() transcript { return transcript{input: -1, output: -1} }

// wireFormat is one simulated format as the cross-format tests see it.
type wireFormat struct {
	name        string
	target      string // the streaming request's target
	bodyTarget  string // the non-streaming request's target
	stream      string // a streaming request body
	plain       string // a non-streaming request body
	capped      string // a streaming request body capped at cappedTokens
	streamType  string
	bodyType    string
	finish      string // finish reason of a full output
	cappedWhy   string // finish reason of a capped one
	neverUsage  bool   // whether usage never suppresses usage
	read        func(t *testing.T, body []byte) transcript
	readBody    func(t *testing.T, body []byte) transcript
	isContent   func(line string) bool // whether a line of the stream carries a token
	errorShape  func(t *testing.T, status int, body []byte) string
	errorStatus int // the status of the non-streamed error fault
}

// cappedTokens is the limit of wireFormat.capped, and fullTokens the
// handler's output in the cross-format tests: the Responses API accepts no
// max_output_tokens below 16.
const (
	cappedTokens = 16
	fullTokens   = 20
)

const userText = "Say something about speed."

var wireFormats = []wireFormat{
	{
		name:       "openai chat",
		target:     "/v1/chat/completions",
		bodyTarget: "/v1/chat/completions",
		stream:     streamUsageBody,
		plain:      plainBody,
		capped:     `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"max_tokens":16,"messages":[{"role":"user","content":"` + userText + `"}]}`,
		streamType: "text/event-stream; charset=utf-8",
		bodyType:   "application/json",
		finish:     "stop", cappedWhy: "length",
		neverUsage: true,
		read:       readChatStream,
		readBody:   readChatBody,
		isContent:  func(l string) bool { return strings.Contains(l, `"delta":{"content":`) },
		errorShape: openAIErrorShape,
	},
	{
		name:       "openai responses",
		target:     "/v1/responses",
		bodyTarget: "/v1/responses",
		stream:     `{"model":"gpt-5","stream":true,"input":"` + userText + `"}`,
		plain:      `{"model":"gpt-5","instructions":"Be brief.","input":[{"role":"user","content":[{"type":"input_text","text":"` + userText + `"}]}]}`,
		capped:     `{"model":"gpt-5","stream":true,"max_output_tokens":16,"input":"` + userText + `"}`,
		streamType: "text/event-stream; charset=utf-8",
		bodyType:   "application/json",
		finish:     "completed", cappedWhy: "max_output_tokens",
		neverUsage: true,
		read:       readResponsesStream,
		readBody:   readResponsesBody,
		isContent:  func(l string) bool { return strings.HasPrefix(l, `data: {"type":"response.output_text.delta"`) },
		errorShape: openAIErrorShape,
	},
	{
		name:       "anthropic",
		target:     "/v1/messages",
		bodyTarget: "/v1/messages",
		stream:     `{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"` + userText + `"}]}`,
		plain:      `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"` + userText + `"}]}]}`,
		capped:     `{"model":"claude-sonnet-4-5","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"` + userText + `"}]}`,
		streamType: "text/event-stream; charset=utf-8",
		bodyType:   "application/json",
		finish:     "end_turn", cappedWhy: "max_tokens",
		neverUsage: false,
		read:       readAnthropicStream,
		readBody:   readAnthropicBody,
		isContent:  func(l string) bool { return strings.Contains(l, `"type":"text_delta"`) },
		errorShape: anthropicErrorShape,
	},
	{
		name:       "gemini sse",
		target:     "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
		bodyTarget: "/v1beta/models/gemini-2.5-flash:generateContent",
		stream:     `{"contents":[{"role":"user","parts":[{"text":"` + userText + `"}]}]}`,
		plain:      `{"systemInstruction":{"parts":[{"text":"Be brief."}]},"contents":[{"role":"user","parts":[{"text":"` + userText + `"}]}]}`,
		capped:     `{"contents":[{"role":"user","parts":[{"text":"` + userText + `"}]}],"generationConfig":{"maxOutputTokens":16}}`,
		streamType: "text/event-stream",
		bodyType:   "application/json; charset=UTF-8",
		finish:     "STOP", cappedWhy: "MAX_TOKENS",
		neverUsage: true,
		read:       readGeminiSSE,
		readBody:   readGeminiBody,
		isContent:  func(l string) bool { return strings.HasPrefix(l, `data: {"candidates"`) },
		errorShape: geminiErrorShape,
	},
	{
		name:       "gemini array",
		target:     "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
		bodyTarget: "/v1beta/models/gemini-2.5-flash:generateContent",
		stream:     `{"contents":[{"role":"user","parts":[{"text":"` + userText + `"}]}]}`,
		plain:      `{"contents":[{"role":"user","parts":[{"text":"` + userText + `"}]}]}`,
		capped:     `{"contents":[{"role":"user","parts":[{"text":"` + userText + `"}]}],"generationConfig":{"maxOutputTokens":16}}`,
		streamType: "application/json; charset=UTF-8",
		bodyType:   "application/json; charset=UTF-8",
		finish:     "STOP", cappedWhy: "MAX_TOKENS",
		neverUsage: true,
		read:       readGeminiArray,
		readBody:   readGeminiBody,
		isContent:  func(l string) bool { return strings.Contains(l, `{"candidates"`) },
		errorShape: geminiErrorShape,
	},
	{
		name:       "ollama chat",
		target:     "/api/chat",
		bodyTarget: "/api/chat",
		stream:     `{"model":"llama3.2","messages":[{"role":"user","content":"` + userText + `"}]}`,
		plain:      `{"model":"llama3.2","stream":false,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"` + userText + `"}]}`,
		capped:     `{"model":"llama3.2","options":{"num_predict":16},"messages":[{"role":"user","content":"` + userText + `"}]}`,
		streamType: "application/x-ndjson",
		bodyType:   "application/json; charset=utf-8",
		finish:     "stop", cappedWhy: "length",
		neverUsage: true,
		read:       readOllamaChatStream,
		readBody:   readOllamaChatBody,
		isContent:  func(l string) bool { return strings.Contains(l, `"done":false`) },
		errorShape: ollamaErrorShape,
	},
	{
		name:       "ollama generate",
		target:     "/api/generate",
		bodyTarget: "/api/generate",
		stream:     `{"model":"llama3.2","prompt":"` + userText + `"}`,
		plain:      `{"model":"llama3.2","stream":false,"system":"Be brief.","prompt":"` + userText + `"}`,
		capped:     `{"model":"llama3.2","stream":true,"options":{"num_predict":16},"prompt":"` + userText + `"}`,
		streamType: "application/x-ndjson",
		bodyType:   "application/json; charset=utf-8",
		finish:     "stop", cappedWhy: "length",
		neverUsage: true,
		read:       readOllamaGenerateStream,
		readBody:   readOllamaGenerateBody,
		isContent:  func(l string) bool { return strings.Contains(l, `"done":false`) },
		errorShape: ollamaErrorShape,
	},
}

// serveTarget runs one request through h, recovering the panic with which
// an aborted response ends.
func serveTarget(t *testing.T, h *Handler, target, body string, header map[string]string) (res *http.Response, raw []byte, aborted bool) {
	t.Helper()
	w := httptest.NewRecorder()
	r := newRequest("POST", target, body, header)
	func() {
		defer func() {
			if v := recover(); v != nil {
				if v != http.ErrAbortHandler {
					panic(v)
				}
				aborted = true
			}
		}()
		if err := h.ServeHTTP(w, r, nil); err != nil {
			t.Fatalf("ServeHTTP returned %v", err)
		}
	}()
	return w.Result(), w.Body.Bytes(), aborted
}

func planTarget(t *testing.T, h *Handler, target, body string, header map[string]string) Plan {
	t.Helper()
	hdr := http.Header{}
	for k, v := range header {
		hdr.Set(k, v)
	}
	p, err := h.PlanTarget(target, []byte(body), hdr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// sseEvent is one event of a strictly framed SSE stream.
type sseEvent struct {
	name string // "" without an event: line
	data string
}

// sseEvents splits body into events, insisting that every line ends with
// eol, every event with a blank line, and that each event has at most one
// event: line followed by exactly one data: line; rest is what follows the
// last complete event.
func sseEvents(t *testing.T, body []byte, eol string) (evs []sseEvent, rest string) {
	t.Helper()
	s := string(body)
	sep := eol + eol
	for {
		i := strings.Index(s, sep)
		if i < 0 {
			return evs, s
		}
		block := s[:i]
		s = s[i+len(sep):]
		var ev sseEvent
		lines := strings.Split(block, eol)
		if name, ok := strings.CutPrefix(lines[0], "event: "); ok {
			ev.name = name
			lines = lines[1:]
		}
		if len(lines) != 1 {
			t.Fatalf("event %q has %d data lines", block, len(lines))
		}
		data, ok := strings.CutPrefix(lines[0], "data: ")
		if !ok || strings.ContainsAny(data, "\r\n") {
			t.Fatalf("malformed event %q", block)
		}
		ev.data = data
		evs = append(evs, ev)
	}
}

func jsonInt(r gjson.Result) int {
	if !r.Exists() || r.Type == gjson.Null {
		return -1
	}
	return int(r.Int())
}

func openAIErrorShape(t *testing.T, status int, body []byte) string {
	t.Helper()
	r := gjson.ParseBytes(body)
	for _, key := range []string{"error.message", "error.type", "error.param", "error.code"} {
		if !r.Get(key).Exists() {
			t.Errorf("error body lacks %s: %s", key, body)
		}
	}
	return r.Get("error.type").Str
}

func anthropicErrorShape(t *testing.T, status int, body []byte) string {
	t.Helper()
	r := gjson.ParseBytes(body)
	if r.Get("type").Str != "error" || r.Get("error.message").Type != gjson.String {
		t.Errorf("not an Anthropic error: %s", body)
	}
	return r.Get("error.type").Str
}

func geminiErrorShape(t *testing.T, status int, body []byte) string {
	t.Helper()
	r := gjson.ParseBytes(body)
	if int(r.Get("error.code").Int()) != status || r.Get("error.message").Type != gjson.String {
		t.Errorf("not a Gemini error for %d: %s", status, body)
	}
	if !bytes.HasPrefix(body, []byte("{\n  \"error\": {\n    \"code\": ")) {
		t.Errorf("Gemini error not pretty-printed: %q", body)
	}
	return r.Get("error.status").Str
}

func ollamaErrorShape(t *testing.T, status int, body []byte) string {
	t.Helper()
	r := gjson.ParseBytes(body)
	if r.Get("error").Type != gjson.String || len(r.Map()) != 1 {
		t.Errorf("not an Ollama error: %s", body)
	}
	return "" // Ollama's errors have no type
}

// formatHandler is the cross-format tests' handler: fullTokens tokens in
// a few microseconds.
func formatHandler(t *testing.T, h Handler) *Handler {
	t.Helper()
	if h.OutputTokens == 0 {
		h.OutputTokens = fullTokens
	}
	return fast(t, h)
}

func TestFormatsStream(t *testing.T) {
	for _, f := range wireFormats {
		for _, tc := range []struct {
			name       string
			handler    Handler
			body       func(wireFormat) string
			header     map[string]string
			wantTokens int
			wantCapped bool
			wantUsage  bool
		}{
			{name: "full", body: func(f wireFormat) string { return f.stream }, wantTokens: fullTokens, wantUsage: true},
			{name: "capped", body: func(f wireFormat) string { return f.capped }, wantTokens: cappedTokens, wantCapped: true, wantUsage: true},
			{name: "usage never", handler: Handler{Usage: UsageNever}, body: func(f wireFormat) string { return f.stream }, wantTokens: fullTokens, wantUsage: !f.neverUsage},
			{name: "usage header never", body: func(f wireFormat) string { return f.stream }, header: map[string]string{HeaderUsage: "never"}, wantTokens: fullTokens, wantUsage: !f.neverUsage},
			{name: "usage always", handler: Handler{Usage: UsageAlways}, body: func(f wireFormat) string { return f.stream }, wantTokens: fullTokens, wantUsage: true},
			{name: "output tokens header", body: func(f wireFormat) string { return f.stream }, header: map[string]string{HeaderOutputTokens: "3"}, wantTokens: 3, wantUsage: true},
		} {
			t.Run(f.name+"/"+tc.name, func(t *testing.T) {
				h := formatHandler(t, tc.handler)
				body := tc.body(f)
				res, raw, _ := serveTarget(t, h, f.target, body, tc.header)
				if res.StatusCode != 200 {
					t.Fatalf("status %d: %s", res.StatusCode, raw)
				}
				if ct := res.Header.Get("Content-Type"); ct != f.streamType {
					t.Errorf("Content-Type %q, want %q", ct, f.streamType)
				}
				p := planTarget(t, h, f.target, body, tc.header)
				tr := f.read(t, raw)
				if tr.events != tc.wantTokens || tr.text != p.Text() || len(p.Tokens) != tc.wantTokens {
					t.Errorf("%d content events with text %q; plan has %d tokens %q", tr.events, tr.text, len(p.Tokens), p.Text())
				}
				wantFinish := f.finish
				if tc.wantCapped {
					wantFinish = f.cappedWhy
				}
				if !tr.done || tr.finish != wantFinish || tr.errType != "" || p.FinishReason != wantFinish || p.Capped != tc.wantCapped {
					t.Errorf("done %v finish %q error %q; want done, finish %q (plan %q, capped %v)", tr.done, tr.finish, tr.errType, wantFinish, p.FinishReason, p.Capped)
				}
				if p.Usage != tc.wantUsage {
					t.Errorf("plan usage %v, want %v", p.Usage, tc.wantUsage)
				}
				if tc.wantUsage && (tr.input != p.PromptTokens || tr.output != tc.wantTokens) {
					t.Errorf("usage %d in %d out, want %d in %d out", tr.input, tr.output, p.PromptTokens, tc.wantTokens)
				}
				if !tc.wantUsage && (tr.input != -1 || tr.output != -1) {
					t.Errorf("usage %d in %d out, want none", tr.input, tr.output)
				}
				if got := res.Trailer.Get(HeaderOutputTokens); got != strconv.Itoa(tc.wantTokens) {
					t.Errorf("output tokens trailer %q", got)
				}
			})
		}
	}
}

func TestFormatsBody(t *testing.T) {
	for _, f := range wireFormats {
		for _, tc := range []struct {
			name      string
			handler   Handler
			wantUsage bool
		}{
			{name: "auto", wantUsage: true},
			{name: "never", handler: Handler{Usage: UsageNever}, wantUsage: !f.neverUsage},
		} {
			t.Run(f.name+"/"+tc.name, func(t *testing.T) {
				h := formatHandler(t, tc.handler)
				res, raw, _ := serveTarget(t, h, f.bodyTarget, f.plain, nil)
				if res.StatusCode != 200 {
					t.Fatalf("status %d: %s", res.StatusCode, raw)
				}
				if ct := res.Header.Get("Content-Type"); ct != f.bodyType {
					t.Errorf("Content-Type %q, want %q", ct, f.bodyType)
				}
				p := planTarget(t, h, f.bodyTarget, f.plain, nil)
				if p.Stream {
					t.Fatal("plan of a non-streamed request streams")
				}
				tr := f.readBody(t, raw)
				if tr.text != p.Text() || tr.finish != f.finish || !tr.done {
					t.Errorf("text %q finish %q done %v; plan %q %q", tr.text, tr.finish, tr.done, p.Text(), p.FinishReason)
				}
				if p.Usage != tc.wantUsage {
					t.Errorf("plan usage %v, want %v", p.Usage, tc.wantUsage)
				}
				if tc.wantUsage && (tr.input != p.PromptTokens || tr.output != fullTokens) {
					t.Errorf("usage %d in %d out, want %d in %d out", tr.input, tr.output, p.PromptTokens, fullTokens)
				}
				if !tc.wantUsage && (tr.input != -1 || tr.output != -1) {
					t.Errorf("usage %d in %d out, want none", tr.input, tr.output)
				}
				// The system prompt counts as input: each plain body
				// has "Be brief." (9 bytes) beside the user's text,
				// except Gemini's array case.
				if p.PromptTokens < len(userText)/4 {
					t.Errorf("prompt tokens %d", p.PromptTokens)
				}
				if res.Trailer.Get(HeaderOutputTokens) != strconv.Itoa(fullTokens) {
					t.Errorf("trailers %v", res.Trailer)
				}
			})
		}
	}
}

func TestFormatsStreamFaults(t *testing.T) {
	const n = 10
	for _, f := range wireFormats {
		for _, tc := range []struct {
			name       string
			handler    Handler
			header     map[string]string
			wantTokens int
			wantError  bool
			wantAbort  bool
		}{
			{name: "error after 3", header: map[string]string{HeaderErrorAfter: "3"}, wantTokens: 3, wantError: true},
			{name: "error before first token", header: map[string]string{HeaderErrorAfter: "0"}, wantTokens: 0, wantError: true},
			{name: "error after the end", handler: Handler{ErrorAfter: intp(50)}, wantTokens: n, wantError: true},
			{name: "truncate after 4", header: map[string]string{HeaderTruncateAfter: "4"}, wantTokens: 4},
			{name: "truncate after the end", header: map[string]string{HeaderTruncateAfter: "10"}, wantTokens: n},
			{name: "configured truncate", handler: Handler{TruncateAfter: intp(6)}, wantTokens: 6},
			{name: "earliest fault wins", handler: Handler{ErrorAfter: intp(5)}, header: map[string]string{HeaderTruncateAfter: "2"}, wantTokens: 2},
			{name: "abort after 2", header: map[string]string{HeaderAbortAfter: "2"}, wantTokens: 2, wantAbort: true},
		} {
			t.Run(f.name+"/"+tc.name, func(t *testing.T) {
				tc.handler.OutputTokens = n
				h := formatHandler(t, tc.handler)
				res, raw, aborted := serveTarget(t, h, f.target, f.stream, tc.header)
				if aborted != tc.wantAbort {
					t.Fatalf("aborted %v, want %v", aborted, tc.wantAbort)
				}
				if res.StatusCode != 200 {
					t.Fatalf("status %d", res.StatusCode)
				}
				tr := f.read(t, raw)
				if tr.events != tc.wantTokens {
					t.Errorf("%d content events, want %d", tr.events, tc.wantTokens)
				}
				if tr.done || tr.finish != "" {
					t.Errorf("a failed stream ended normally: done %v finish %q", tr.done, tr.finish)
				}
				if (tr.errType != "") != tc.wantError {
					t.Errorf("error %q, want one: %v", tr.errType, tc.wantError)
				}
				if !tc.wantAbort {
					if got := res.Trailer.Get(HeaderOutputTokens); got != strconv.Itoa(tc.wantTokens) {
						t.Errorf("output tokens trailer %q, want %d", got, tc.wantTokens)
					}
				}
				p := planTarget(t, h, f.target, f.stream, tc.header)
				if p.Sent() != tc.wantTokens {
					t.Errorf("plan sends %d tokens, want %d", p.Sent(), tc.wantTokens)
				}
			})
		}
	}
}

func TestFormatsBodyFaults(t *testing.T) {
	for _, f := range wireFormats {
		t.Run(f.name, func(t *testing.T) {
			h := formatHandler(t, Handler{Profile: Profile{OutputTokens: 10}})
			p := planTarget(t, h, f.bodyTarget, f.plain, nil)

			res, raw, _ := serveTarget(t, h, f.bodyTarget, f.plain, map[string]string{HeaderErrorAfter: "3"})
			if res.StatusCode != 500 {
				t.Errorf("error fault: status %d: %s", res.StatusCode, raw)
			}
			f.errorShape(t, 500, raw)

			res, raw, _ = serveTarget(t, h, f.bodyTarget, f.plain, map[string]string{HeaderTruncateAfter: "3"})
			if res.StatusCode != 200 || gjson.ValidBytes(raw) || !bytes.HasSuffix(raw, []byte(p.Tokens[0]+p.Tokens[1]+p.Tokens[2])) {
				t.Errorf("truncate fault: %d %s", res.StatusCode, raw)
			}
			if res.Trailer.Get(HeaderOutputTokens) != "3" {
				t.Errorf("truncate fault trailers %v", res.Trailer)
			}

			_, _, aborted := serveTarget(t, h, f.bodyTarget, f.plain, map[string]string{HeaderAbortAfter: "3"})
			if !aborted {
				t.Error("abort fault did not abort")
			}
		})
	}
}

func TestFormatsErrorStatus(t *testing.T) {
	// The type each format sends with a status, "" where it has none.
	want := map[string]map[int]string{
		"openai chat":      {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error", 429: "requests", 500: "server_error", 503: "server_error", 529: "server_error"},
		"openai responses": {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error", 429: "requests", 500: "server_error", 503: "server_error", 529: "server_error"},
		"anthropic":        {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error", 429: "rate_limit_error", 500: "api_error", 503: "overloaded_error", 529: "overloaded_error"},
		"gemini sse":       {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 529: "INTERNAL"},
		"gemini array":     {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE", 529: "INTERNAL"},
		"ollama chat":      {400: "", 401: "", 404: "", 429: "", 500: "", 503: "", 529: ""},
		"ollama generate":  {400: "", 401: "", 404: "", 429: "", 500: "", 503: "", 529: ""},
	}
	for _, f := range wireFormats {
		for status, wantType := range want[f.name] {
			t.Run(f.name+"/"+strconv.Itoa(status), func(t *testing.T) {
				h := formatHandler(t, Handler{})
				res, raw, _ := serveTarget(t, h, f.target, `not even JSON`, map[string]string{HeaderStatus: strconv.Itoa(status)})
				if res.StatusCode != status {
					t.Fatalf("status %d, want %d", res.StatusCode, status)
				}
				if got := f.errorShape(t, status, raw); got != wantType {
					t.Errorf("error type %q, want %q: %s", got, wantType, raw)
				}
				if res.Header.Get("Content-Length") != strconv.Itoa(len(raw)) {
					t.Errorf("Content-Length %q for %d bytes", res.Header.Get("Content-Length"), len(raw))
				}
			})
		}
		t.Run(f.name+"/no body", func(t *testing.T) {
			h := formatHandler(t, Handler{FailStatus: 503, FailStatusBody: StatusBodyNone})
			res, raw, _ := serveTarget(t, h, f.target, f.stream, nil)
			if res.StatusCode != 503 || len(raw) != 0 {
				t.Errorf("status %d body %q", res.StatusCode, raw)
			}
		})
		t.Run(f.name+"/bad header", func(t *testing.T) {
			h := formatHandler(t, Handler{})
			res, raw, _ := serveTarget(t, h, f.target, f.stream, map[string]string{HeaderJitter: "2"})
			if res.StatusCode != 400 || !strings.Contains(string(raw), HeaderJitter) {
				t.Errorf("status %d body %s", res.StatusCode, raw)
			}
			f.errorShape(t, 400, raw)
		})
		t.Run(f.name+"/GET", func(t *testing.T) {
			h := formatHandler(t, Handler{})
			w := httptest.NewRecorder()
			if err := h.ServeHTTP(w, newRequest("GET", f.target, "", nil), nil); err != nil {
				t.Fatal(err)
			}
			if w.Code != 405 || w.Header().Get("Allow") != "POST" {
				t.Errorf("status %d Allow %q", w.Code, w.Header().Get("Allow"))
			}
			f.errorShape(t, 405, w.Body.Bytes())
		})
	}
}

func TestFormatsDeterministicBytes(t *testing.T) {
	h := formatHandler(t, Handler{Profile: Profile{Jitter: 0.5}})
	for _, f := range wireFormats {
		for _, c := range []struct{ target, body string }{{f.target, f.stream}, {f.target, f.capped}, {f.bodyTarget, f.plain}} {
			_, first, _ := serveTarget(t, h, c.target, c.body, nil)
			_, second, _ := serveTarget(t, h, c.target, c.body, nil)
			if !bytes.Equal(first, second) {
				t.Errorf("%s: two identical requests got different bytes:\n%s\n%s", f.name, first, second)
			}
		}
	}
	// The same conversation gets the same words in every format: the text
	// depends on the seed and the body only, and these bodies differ.
	chat := planTarget(t, h, wireFormats[0].target, wireFormats[0].stream, nil)
	for _, f := range wireFormats[1:] {
		if p := planTarget(t, h, f.target, f.stream, nil); p.Text() == chat.Text() {
			t.Errorf("%s: another body gave the same text", f.name)
		}
	}
}

func TestPlanTarget(t *testing.T) {
	h := &Handler{}
	for _, tc := range []struct {
		name, target, body string
		wantFormat         string
		wantModel          string
		wantStream         bool
		wantIDPrefix       string
		wantErr            string
	}{
		{name: "chat", target: "/v1/chat/completions", body: streamBody, wantFormat: FormatOpenAIChat, wantModel: "gpt-4o-mini", wantStream: true, wantIDPrefix: "chatcmpl-sim"},
		{name: "azure chat", target: "/openai/deployments/d/chat/completions?api-version=2024-02-01", body: plainBody, wantFormat: FormatOpenAIChat, wantModel: "gpt-4o-mini", wantIDPrefix: "chatcmpl-sim"},
		{name: "responses", target: "/v1/responses", body: `{"input":"hi"}`, wantFormat: FormatOpenAIResponses, wantModel: "tokentap-sim", wantIDPrefix: "resp_sim"},
		{name: "anthropic", target: "/anthropic/v1/messages", body: `{"model":"claude","stream":true,"messages":[{"role":"user","content":"hi"}]}`, wantFormat: FormatAnthropic, wantModel: "claude", wantStream: true, wantIDPrefix: "msg_sim"},
		{name: "gemini sse", target: "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", body: `{"model":"ignored","contents":[{"parts":[{"text":"hi"}]}]}`, wantFormat: FormatGemini, wantModel: "gemini-2.5-pro", wantStream: true, wantIDPrefix: "sim"},
		{name: "gemini body", target: "/v1beta/models/gemini-2.5-pro:generateContent", body: `{"contents":[{"parts":[{"text":"hi"}]}]}`, wantFormat: FormatGemini, wantModel: "gemini-2.5-pro", wantIDPrefix: "sim"},
		{name: "vertex", target: "/v1/projects/p/locations/l/publishers/google/models/gemini-2.0-flash:streamGenerateContent", body: `{"contents":[{"parts":[{"text":"hi"}]}]}`, wantFormat: FormatGemini, wantModel: "gemini-2.0-flash", wantStream: true, wantIDPrefix: "sim"},
		{name: "ollama chat streams by default", target: "/api/chat", body: `{"model":"llama3.2","messages":[]}`, wantFormat: FormatOllamaChat, wantModel: "llama3.2", wantStream: true, wantIDPrefix: "sim"},
		{name: "ollama generate stream false", target: "/api/generate", body: `{"model":"llama3.2","prompt":"hi","stream":false}`, wantFormat: FormatOllamaGenerate, wantModel: "llama3.2", wantIDPrefix: "sim"},
		{name: "ollama stream null", target: "/api/generate", body: `{"prompt":"hi","stream":null}`, wantFormat: FormatOllamaGenerate, wantModel: "tokentap-sim", wantStream: true, wantIDPrefix: "sim"},
		{name: "unknown path", target: "/v1/embeddings", body: `{}`, wantErr: "404"},
		{name: "gemini unknown method", target: "/v1beta/models/gemini-2.5-pro:countTokens", body: `{}`, wantErr: "404"},
		{name: "gemini without model", target: "/v1beta/models/:generateContent", body: `{}`, wantErr: "404"},
		{name: "count_tokens", target: "/v1/messages/count_tokens", body: `{}`, wantErr: "404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := h.PlanTarget(tc.target, []byte(tc.body), nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Format != tc.wantFormat || p.Model != tc.wantModel || p.Stream != tc.wantStream ||
				!strings.HasPrefix(p.ID, tc.wantIDPrefix) || len(p.ID) != len(tc.wantIDPrefix)+16 {
				t.Errorf("plan %s %q stream %v id %q", p.Format, p.Model, p.Stream, p.ID)
			}
		})
	}
}

func TestFormatsRequestErrors(t *testing.T) {
	for _, tc := range []struct {
		name, target, body string
		wantStatus         int
		wantMessage        string
	}{
		{name: "responses not JSON", target: "/v1/responses", body: `{`, wantStatus: 400, wantMessage: "JSON"},
		{name: "responses without input", target: "/v1/responses", body: `{"model":"gpt-5"}`, wantStatus: 400, wantMessage: "'input'"},
		{name: "responses empty input", target: "/v1/responses", body: `{"input":[]}`, wantStatus: 400, wantMessage: "'input'"},
		{name: "responses max_output_tokens below 16", target: "/v1/responses", body: `{"input":"hi","max_output_tokens":5}`, wantStatus: 400, wantMessage: ">= 16"},
		{name: "responses max_output_tokens string", target: "/v1/responses", body: `{"input":"hi","max_output_tokens":"5"}`, wantStatus: 400, wantMessage: "max_output_tokens"},
		{name: "anthropic array", target: "/v1/messages", body: `[]`, wantStatus: 400, wantMessage: "JSON object"},
		{name: "anthropic without messages", target: "/v1/messages", body: `{"max_tokens":5}`, wantStatus: 400, wantMessage: "messages: Field required"},
		{name: "anthropic zero max_tokens", target: "/v1/messages", body: `{"max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, wantStatus: 400, wantMessage: "max_tokens"},
		{name: "gemini without contents", target: "/v1beta/models/g:generateContent", body: `{}`, wantStatus: 400, wantMessage: "contents is not specified"},
		{name: "gemini fractional maxOutputTokens", target: "/v1beta/models/g:generateContent", body: `{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":2.5}}`, wantStatus: 400, wantMessage: "max_output_tokens"},
		{name: "ollama not JSON", target: "/api/chat", body: `nope`, wantStatus: 400, wantMessage: "invalid character"},
		{name: "ollama num_predict string", target: "/api/generate", body: `{"prompt":"hi","options":{"num_predict":"x"}}`, wantStatus: 400, wantMessage: "num_predict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, raw, _ := serveTarget(t, formatHandler(t, Handler{}), tc.target, tc.body, nil)
			if res.StatusCode != tc.wantStatus || !strings.Contains(string(raw), tc.wantMessage) {
				t.Errorf("status %d body %s; want %d with %q", res.StatusCode, raw, tc.wantStatus, tc.wantMessage)
			}
		})
	}
}

func TestOutputCaps(t *testing.T) {
	for _, tc := range []struct {
		name, target, body string
		want               int
		capped             bool
	}{
		{name: "anthropic cap above output", target: "/v1/messages", body: `{"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, want: fullTokens},
		{name: "responses cap equal to output", target: "/v1/responses", body: `{"input":"hi","max_output_tokens":20}`, want: fullTokens},
		{name: "gemini cap 1", target: "/v1beta/models/g:streamGenerateContent", body: `{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":1}}`, want: 1, capped: true},
		{name: "ollama num_predict -1 is unbounded", target: "/api/generate", body: `{"prompt":"hi","options":{"num_predict":-1}}`, want: fullTokens},
		{name: "ollama num_predict -2 fills the context", target: "/api/chat", body: `{"messages":[],"options":{"num_predict":-2}}`, want: fullTokens},
		{name: "ollama num_predict 0", target: "/api/chat", body: `{"messages":[],"options":{"num_predict":0}}`, want: fullTokens},
		{name: "huge cap", target: "/v1/messages", body: `{"max_tokens":1e30,"messages":[{"role":"user","content":"hi"}]}`, want: fullTokens},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planTarget(t, formatHandler(t, Handler{}), tc.target, tc.body, nil)
			if len(p.Tokens) != tc.want || p.Capped != tc.capped {
				t.Errorf("%d tokens capped %v, want %d %v", len(p.Tokens), p.Capped, tc.want, tc.capped)
			}
		})
	}
}

// readChatStream reads an OpenAI chat stream: a role chunk, content chunks,
// a finish chunk, the usage chunk if any and [DONE]; or an error event.
func readChatStream(t *testing.T, body []byte) transcript {
	t.Helper()
	tr := newTranscript()
	evs, rest := sseEvents(t, body, "\n")
	if rest != "" {
		t.Fatalf("stream ends inside an event: %q", rest)
	}
	var text strings.Builder
	for i, ev := range evs {
		if tr.done || tr.errType != "" {
			t.Fatalf("event after the end: %s", ev.data)
		}
		if ev.name != "" {
			t.Fatalf("chat event with a name: %q", ev.name)
		}
		if ev.data == "[DONE]" {
			tr.done = true
			continue
		}
		c := gjson.Parse(ev.data)
		if e := c.Get("error"); e.Exists() {
			tr.errType = e.Get("type").Str
			continue
		}
		if u := c.Get("usage"); u.IsObject() {
			tr.input, tr.output = jsonInt(u.Get("prompt_tokens")), jsonInt(u.Get("completion_tokens"))
			continue
		}
		ch := c.Get("choices.0")
		switch {
		case i == 0:
			if ch.Get("delta.role").Str != "assistant" {
				t.Fatalf("first event is not the role chunk: %s", ev.data)
			}
		case ch.Get("finish_reason").Type == gjson.String:
			tr.finish = ch.Get("finish_reason").Str
		case ch.Get("delta.content").Exists():
			if tr.finish != "" {
				t.Fatalf("content after the finish chunk: %s", ev.data)
			}
			tr.events++
			text.WriteString(ch.Get("delta.content").Str)
		default:
			t.Fatalf("unexpected chunk %s", ev.data)
		}
	}
	tr.text = text.String()
	return tr
}

func readChatBody(t *testing.T, body []byte) transcript {
	t.Helper()
	tr := newTranscript()
	c := gjson.ParseBytes(body)
	if !gjson.ValidBytes(body) || c.Get("object").Str != "chat.completion" {
		t.Fatalf("not a chat.completion: %s", body)
	}
	tr.events, tr.done = -1, true
	tr.text = c.Get("choices.0.message.content").Str
	tr.finish = c.Get("choices.0.finish_reason").Str
	tr.input, tr.output = jsonInt(c.Get("usage.prompt_tokens")), jsonInt(c.Get("usage.completion_tokens"))
	return tr
}
