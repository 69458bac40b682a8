package meter

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/sse"
)

const (
	geminiStreamPath   = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
	geminiGeneratePath = "/v1beta/models/gemini-2.5-flash:generateContent"
	geminiVertexPath   = "/v1/projects/acme-prod/locations/us-central1/publishers/google/models/gemini-2.5-pro:streamGenerateContent"
)

// geminiFixtureFiles lists the fixtures (not their README).
func geminiFixtureFiles() []string {
	sse, _ := filepath.Glob(filepath.Join("testdata", "gemini", "*.sse"))
	js, _ := filepath.Glob(filepath.Join("testdata", "gemini", "*.json"))
	return append(sse, js...)
}

// geminiExchangeFor serves a fixture the way its name says: sse_* as
// ?alt=sse, array_* as the default streamed array, body_* as a
// generateContent answer, error_* as a failed call. The request path says
// whether it streams.
func geminiExchangeFor(name string) exchange {
	switch {
	case strings.HasPrefix(name, "sse_"):
		return exchange{200, "text/event-stream", geminiStreamPath}
	case strings.HasPrefix(name, "array_"):
		return exchange{200, "application/json; charset=UTF-8", geminiStreamPath}
	case strings.HasPrefix(name, "error_429"):
		return exchange{429, "application/json; charset=UTF-8", geminiGeneratePath}
	case strings.HasPrefix(name, "error_"):
		return exchange{503, "application/json; charset=UTF-8", geminiStreamPath}
	}
	return exchange{200, "application/json; charset=UTF-8", geminiGeneratePath}
}

// geminiPieces cuts a fixture so each piece completes one event: SSE after
// each CRLF CRLF (an unframed tail is its own piece), a JSON array after
// each element as encoding/json finds them (a cut-off tail is its own
// piece). It shares no code with the framers under test.
func geminiPieces(name string, b []byte) [][]byte {
	var cuts []int
	if strings.HasSuffix(name, ".sse") {
		for i := 0; ; {
			j := bytes.Index(b[i:], []byte("\r\n\r\n"))
			if j < 0 {
				break
			}
			i += j + 4
			cuts = append(cuts, i)
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(b))
		if tok, err := dec.Token(); err == nil && tok == json.Delim('[') {
			for dec.More() {
				var raw json.RawMessage
				if dec.Decode(&raw) != nil {
					break
				}
				cuts = append(cuts, int(dec.InputOffset()))
			}
		}
	}
	var out [][]byte
	prev := 0
	for _, c := range cuts {
		out = append(out, b[prev:c])
		prev = c
	}
	if prev < len(b) {
		if len(out) > 0 && len(bytes.TrimSpace(b[prev:])) <= 1 {
			// Only the array's closing bracket is left: it belongs to the
			// last element's write.
			out[len(out)-1] = b[prev-len(out[len(out)-1]):]
		} else {
			out = append(out, b[prev:])
		}
	}
	return out
}

// geminiRun meters pieces delivered at the given times on a fresh dialect.
func geminiRun(x exchange, req []byte, pieces [][]byte, times []time.Duration, end time.Duration) *Measurement {
	mt := x.start(newGemini(), Options{}, req)
	for i, p := range pieces {
		mt.Write(p, t0.Add(times[i]))
	}
	return mt.Finish(t0.Add(end), OutcomeUnknown, "")
}

func TestGeminiStreams(t *testing.T) {
	tests := []dialectCase{
		{
			name: "CRLF-framed alt=sse, cumulative usage last wins, first chunk has no candidatesTokenCount, models/ prefix dropped", fixture: "sse_text.sse",
			firstToken: 0, firstVisible: 0, lastToken: 3,
			usage: Usage{5, 44, -1, -1, -1, UsageReported},
			model: "gemini-2.5-flash-preview-05-20", id: "AdVRaMmDCYekqtsPrb_-iAw",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 4,
		},
		{
			name: "thought parts are output before the visible text, thoughtSignature-only last part is not, output = candidates + thoughts", fixture: "sse_thinking.sse",
			firstToken: 0, firstVisible: 2, lastToken: 3,
			usage: Usage{9, 208, -1, -1, 185, UsageReported},
			model: "gemini-3-pro-preview", id: "bH6LaZW8Fp_3nsEPqtaSwQ4",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 5,
		},
		{
			name: "functionCall part is output, not visible", fixture: "sse_function_call.sse",
			firstToken: 0, firstVisible: -1, lastToken: 0,
			usage: Usage{83, 118, -1, -1, 104, UsageReported},
			model: "gemini-2.5-flash", id: "qpc2afWVFJK4vr0Pq6WiyAU",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 1,
		},
		{
			name: "bare unframed JSON error after SSE events is an error event", fixture: "sse_bare_error.sse",
			firstToken: 0, firstVisible: 0, lastToken: 0,
			usage:  Usage{2301, 1, -1, -1, -1, UsageReported},
			model:  "gemini-2.0-flash",
			finish: []string{"STOP"}, outcome: OutcomeUpstreamError, errorType: "UNAVAILABLE", chunks: 3,
		},
		{
			name: "error in a data: event", fixture: "sse_data_error.sse",
			firstToken: 0, firstVisible: 0, lastToken: 0,
			usage: Usage{12, 2, -1, -1, -1, UsageReported},
			model: "gemini-2.5-flash", id: "Zk3aaQ9xEoWd_uMPr4Wq8Qk",
			outcome: OutcomeUpstreamError, errorType: "INTERNAL", chunks: 2,
		},
		{
			name: "stream cut before any finishReason is truncated, keeping the last cumulative usage", fixture: "sse_truncated.sse",
			firstToken: 0, firstVisible: 0, lastToken: 2,
			usage: Usage{7, 13, -1, -1, -1, UsageReported},
			model: "gemini-2.0-flash", id: "trunc-1",
			outcome: OutcomeTruncated, errorType: "truncated", chunks: 3,
		},
		{
			name: "vertex alt=sse: trafficType-only usage, createTime, cached and thought tokens in the last chunk", fixture: "sse_vertex_cached.sse",
			firstToken: 0, firstVisible: 0, lastToken: 2,
			usage: Usage{10480, 350, 8192, -1, 338, UsageReported},
			model: "gemini-2.5-pro", id: "tjXVaYaxFISTq8YP_MWiyAo",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 4,
		},
		{
			name: "safety stop is a finish reason, not an error", fixture: "sse_safety.sse",
			firstToken: 0, firstVisible: 0, lastToken: 0,
			usage: Usage{20, 3, -1, -1, -1, UsageReported},
			model: "gemini-2.0-flash", id: "safe-1",
			finish: []string{"SAFETY"}, outcome: OutcomeCompleted, chunks: 2,
		},
		{
			name: "blocked prompt: no candidates, the block reason is the finish reason", fixture: "sse_blocked_prompt.sse",
			firstToken: -1, firstVisible: -1, lastToken: -1,
			usage: Usage{17, -1, -1, -1, -1, UsageReported},
			model: "gemini-2.5-flash", id: "blk-1",
			finish: []string{"PROHIBITED_CONTENT"}, outcome: OutcomeCompleted, chunks: 1,
		},
		{
			name: "two candidates keep their own finish reasons, index omitted for candidate 0", fixture: "sse_two_candidates.sse",
			firstToken: 0, firstVisible: 0, lastToken: 2,
			usage: Usage{6, 17, -1, -1, -1, UsageReported},
			model: "gemini-2.0-flash", id: "two-1",
			finish: []string{"STOP", "MAX_TOKENS"}, outcome: OutcomeCompleted, chunks: 3,
		},
		{
			name: "grounding: tool-use prompt tokens are input, usage-only chunk after the finish", fixture: "sse_grounding.sse",
			firstToken: 0, firstVisible: 0, lastToken: 1,
			usage: Usage{77, 160, 4, -1, 89, UsageReported},
			model: "gemini-2.5-flash", id: "grd-1",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 3,
		},
		{
			name: "streamed JSON array, pretty-printed with CRLF separators, brackets and escapes in text", fixture: "array_text.json",
			firstToken: 0, firstVisible: 0, lastToken: 2,
			usage: Usage{8, 20, -1, -1, -1, UsageReported},
			model: "gemini-2.0-flash", id: "arr-1",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 3,
		},
		{
			name: "vertex array: streamed functionCall partialArgs are output, an empty functionCall is not", fixture: "array_vertex_partial_args.json",
			firstToken: 0, firstVisible: -1, lastToken: 3,
			usage: Usage{54, 103, -1, -1, 72, UsageReported},
			model: "gemini-3.1-pro-preview", id: "tjXVaYaxFISTq8YP_MWiyAo",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 5,
		},
		{
			name: "error element inside the array", fixture: "array_error_element.json",
			firstToken: 0, firstVisible: 0, lastToken: 0,
			usage: Usage{30, 4, -1, -1, -1, UsageReported},
			model: "gemini-2.5-pro", id: "err-arr",
			outcome: OutcomeUpstreamError, errorType: "UNAVAILABLE", chunks: 2,
		},
		{
			name: "bare error object instead of an array", fixture: "array_bare_error.json",
			firstToken: -1, firstVisible: -1, lastToken: -1,
			usage:   Usage{-1, -1, -1, -1, -1, UsageAbsent},
			outcome: OutcomeThrottled, errorType: "RESOURCE_EXHAUSTED", chunks: 1,
		},
		{
			name: "array cut inside an element is truncated", fixture: "array_truncated.json",
			firstToken: 0, firstVisible: 0, lastToken: 1,
			usage: Usage{11, 6, -1, -1, -1, UsageReported},
			model: "gemini-2.0-flash", id: "cut-arr",
			outcome: OutcomeTruncated, errorType: "truncated", chunks: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := geminiExchangeFor(tt.fixture).start(newGemini(), Options{}, []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`))
			m := replayPieces(mt, geminiPieces(tt.fixture, testdata(t, "gemini", tt.fixture)))
			checkStream(t, m, tt)
			if m.Operation != "generate_content" || m.Request.Model != "gemini-2.5-flash" || !m.Request.Stream {
				t.Errorf("operation %q request %+v", m.Operation, m.Request)
			}
		})
	}
}

func TestGeminiBodies(t *testing.T) {
	tests := []dialectCase{
		{
			name: "generateContent: usage from the body, thought text estimated but untimed", fixture: "body_generate_content.json",
			status: 200, contentType: "application/json; charset=UTF-8", path: geminiGeneratePath,
			usage: Usage{2061, 59, 2048, -1, 52, UsageReported},
			model: "gemini-2.5-flash", id: "Xr9kaZ2bIqGq1MkP_IqB8QY", finish: []string{"STOP"}, outcome: OutcomeCompleted, estimated: 19,
		},
		{
			name: "429 error body: the status is the error type, no counts", fixture: "error_429.json",
			status: 429, contentType: "application/json; charset=UTF-8", path: geminiGeneratePath,
			usage: Usage{-1, -1, -1, -1, -1, UsageAbsent}, outcome: OutcomeThrottled, errorType: "429",
		},
		{
			name: "503 on a streaming path: the error arrives as a one-element array, read whole", fixture: "error_503_array.json",
			status: 503, contentType: "application/json; charset=UTF-8", path: geminiStreamPath,
			usage: Usage{-1, -1, -1, -1, -1, UsageAbsent}, outcome: OutcomeUpstreamError, errorType: "503",
		},
		{
			name: "a streamed array read whole when the path did not say it streams", fixture: "array_text.json",
			status: 200, contentType: "application/json", path: "/v1beta/models/gemini-2.0-flash",
			usage: Usage{8, 20, -1, -1, -1, UsageReported},
			model: "gemini-2.0-flash", id: "arr-1", finish: []string{"STOP"}, outcome: OutcomeCompleted, estimated: 26,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{tt.status, tt.contentType, tt.path}.start(newGemini(), Options{}, []byte(`{"contents":[],"generationConfig":{"maxOutputTokens":256,"temperature":0.4,"topP":0.95}}`))
			m := readInPieces(mt, testdata(t, "gemini", tt.fixture), 100)
			checkBody(t, m, tt)
			if m.EstimatedOutputTokens != tt.estimated {
				t.Errorf("EstimatedOutputTokens = %d, want %d", m.EstimatedOutputTokens, tt.estimated)
			}
			if m.Request.MaxTokens != 256 || m.Request.Temperature != 0.4 || m.Request.TopP != 0.95 {
				t.Errorf("request = %+v", m.Request)
			}
		})
	}
}

// TestGeminiTraps holds the cases where Gemini's format differs from what a
// reader expects, each with the wrong reading it guards against.
func TestGeminiTraps(t *testing.T) {
	sseX := geminiExchangeFor("sse_")
	t.Run("trafficType-only usage is not reported usage", func(t *testing.T) {
		pieces := geminiPieces("v.sse", testdata(t, "gemini", "sse_vertex_cached.sse"))[:3]
		m := geminiRun(sseX, nil, pieces, []time.Duration{at(0), at(1), at(2)}, at(3))
		if m.Usage.Source != UsageEstimated || m.Usage.InputTokens != -1 || m.Usage.OutputTokens != m.EstimatedOutputTokens {
			t.Errorf("usage %+v, want the estimate", m.Usage)
		}
	})
	t.Run("one of two candidates finished is not the end", func(t *testing.T) {
		pieces := geminiPieces("c.sse", testdata(t, "gemini", "sse_two_candidates.sse"))[:2]
		m := geminiRun(sseX, nil, pieces, []time.Duration{at(0), at(1)}, at(2))
		if m.Outcome != OutcomeTruncated || !reflect.DeepEqual(m.FinishReasons, []string{"STOP"}) {
			t.Errorf("outcome %v finish %q, want truncated [STOP]", m.Outcome, m.FinishReasons)
		}
	})
	t.Run("CRLF events are handed out as they arrive, not at EOF", func(t *testing.T) {
		b := testdata(t, "gemini", "sse_text.sse")
		first := bytes.Index(b, []byte("\r\n\r\n")) + 4
		mt := New(newGemini(), Options{}, t0)
		mt.Response(200, "text/event-stream", "")
		mt.Write(b[:first], t0.Add(step))
		if mt.M.FirstToken != step {
			t.Errorf("FirstToken %v after the first event, want %v", mt.M.FirstToken, step)
		}
	})
	t.Run("array elements are handed out before the array closes", func(t *testing.T) {
		b := testdata(t, "gemini", "array_text.json")
		mt := New(newGemini(), Options{}, t0)
		mt.Request(geminiStreamPath, nil, false)
		mt.Response(200, "application/json", "")
		mt.Write(b[:bytes.Index(b, []byte("\r\n,"))], t0.Add(step))
		if mt.M.FirstToken != step || mt.M.Chunks != 1 {
			t.Errorf("FirstToken %v Chunks %d after the first element", mt.M.FirstToken, mt.M.Chunks)
		}
	})
	t.Run("bare error cut off by the end of the stream still fails it", func(t *testing.T) {
		b := testdata(t, "gemini", "sse_bare_error.sse")
		b = b[:bytes.Index(b, []byte(`"message"`))]
		m := geminiRun(sseX, nil, [][]byte{b}, []time.Duration{step}, 2*step)
		if m.Outcome != OutcomeUpstreamError || m.ErrorType != "503" {
			t.Errorf("outcome %v %q, want upstream_error 503", m.Outcome, m.ErrorType)
		}
	})
	t.Run("a brace inside an SSE data line is not a bare object", func(t *testing.T) {
		in := "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"\\r\\n{\\\"k\\\": 1}\"}]},\"finishReason\": \"STOP\"}]}\r\n\r\n"
		m := geminiRun(sseX, nil, [][]byte{[]byte(in)}, []time.Duration{step}, 2*step)
		if m.Outcome != OutcomeCompleted || m.Chunks != 1 || m.FirstVisibleToken != step {
			t.Errorf("got %+v", m)
		}
	})
	t.Run("oversized bare object is skipped and counted", func(t *testing.T) {
		in := "{\n  \"error\": {\"message\": \"" + strings.Repeat("x", 200) + "\", \"status\": \"UNAVAILABLE\"}\n}\n"
		mt := New(newGemini(), Options{MaxEventSize: 100}, t0)
		mt.Response(200, "text/event-stream", "")
		mt.Write([]byte(in[:50]), t0.Add(step))
		mt.Write([]byte(in[50:]), t0.Add(step))
		m := mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
		if m.Degraded != 1 || m.DegradedReason != "event_over_cap" || m.Chunks != 0 {
			t.Errorf("got %+v", m)
		}
	})
	t.Run("gateway [DONE] is ignored", func(t *testing.T) {
		b := append(testdata(t, "gemini", "sse_text.sse"), "data: [DONE]\r\n\r\n"...)
		m := geminiRun(sseX, nil, [][]byte{b}, []time.Duration{step}, 2*step)
		if m.Degraded != 0 || m.Outcome != OutcomeCompleted {
			t.Errorf("got %+v", m)
		}
	})
}

func TestGeminiRequest(t *testing.T) {
	tests := []struct {
		name string
		path string
		body string
		want Request
	}{
		{"gemini streaming path", geminiStreamPath,
			`{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":100,"temperature":0.7,"topP":0.9}}`,
			Request{Model: "gemini-2.5-flash", Stream: true, HasStream: true, MaxTokens: 100, HasMaxTokens: true, Temperature: 0.7, HasTemperature: true, TopP: 0.9, HasTopP: true}},
		{"vertex publisher path", geminiVertexPath, `{}`,
			Request{Model: "gemini-2.5-pro", Stream: true, HasStream: true}},
		{"generateContent is not streamed, trailing slash", "/v1beta/models/gemini-2.0-flash:generateContent/", `{"generationConfig":{"temperature":0}}`,
			Request{Model: "gemini-2.0-flash", HasStream: true, HasTemperature: true}},
		{"tuned model", "/v1beta/tunedModels/my-tuned-1:generateContent", ``,
			Request{Model: "my-tuned-1", HasStream: true}},
		{"snake_case proto field names", geminiGeneratePath, `{"generation_config":{"max_output_tokens":64,"top_p":0.5}}`,
			Request{Model: "gemini-2.5-flash", HasStream: true, MaxTokens: 64, HasMaxTokens: true, TopP: 0.5, HasTopP: true}},
		{"prefix of a long body still gives the model from the path", geminiStreamPath, `{"contents":[{"parts":[{"text":"aaaa`,
			Request{Model: "gemini-2.5-flash", Stream: true, HasStream: true}},
		{"wrong types are ignored", geminiGeneratePath, `{"generationConfig":{"maxOutputTokens":"many","temperature":null}}`,
			Request{Model: "gemini-2.5-flash", HasStream: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			newGemini().Request(&r, tt.path, []byte(tt.body))
			if !reflect.DeepEqual(r, tt.want) {
				t.Errorf("got %+v, want %+v", r, tt.want)
			}
		})
	}
}

func TestGeminiDetection(t *testing.T) {
	tests := []struct {
		path string
		want string
	}{
		{geminiStreamPath, "gemini"},
		{geminiGeneratePath, "gemini"},
		{geminiVertexPath, "gemini"},
		{"/v1/projects/p/locations/global/publishers/google/models/gemini-2.0-flash-001:generateContent", "gemini"},
		{"/v1beta/models/gemini-2.5-flash:countTokens", "openai_chat"},
		{"/v1beta/models/gemini-2.5-flash", "openai_chat"},
		{"/v1beta/openai/chat/completions", "openai_chat"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			if got := DetectDialect(tt.path).Name; got != tt.want {
				t.Errorf("DetectDialect = %q, want %q", got, tt.want)
			}
		})
	}
	info, ok := LookupDialect("gemini")
	if !ok || info.Provider != "gcp.gemini" || info.New().Operation(geminiStreamPath) != "generate_content" {
		t.Errorf("registration %+v", info)
	}
}

func TestGeminiFraming(t *testing.T) {
	emit := func(*sse.Event) {}
	tests := []struct {
		name      string
		path      string
		status    int
		mediaType string
		want      Framing
		custom    bool
	}{
		{"alt=sse stream", geminiStreamPath, 200, "text/event-stream", FramingCustom, true},
		{"default streamed array", geminiStreamPath, 200, "application/json", FramingCustom, true},
		{"generateContent body", geminiGeneratePath, 200, "application/json", FramingBody, false},
		{"error status on a streaming path", geminiStreamPath, 429, "application/json", FramingBody, false},
		{"error status labelled as an event stream", geminiStreamPath, 500, "text/event-stream", FramingBody, false},
		{"something else", geminiGeneratePath, 200, "text/html", FramingNone, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGemini()
			g.Request(&Request{}, tt.path, nil)
			f, fr := g.Framing(tt.status, tt.mediaType, 1024, emit)
			if f != tt.want || (fr != nil) != tt.custom {
				t.Errorf("Framing = %v %v, want %v custom %v", f, fr, tt.want, tt.custom)
			}
		})
	}
}

// TestGeminiSplitInvariance: however the bytes are cut into writes, the
// measurement is the same. Every single split point of every fixture is
// tried, then byte-by-byte writes.
func TestGeminiSplitInvariance(t *testing.T) {
	files := geminiFixtureFiles()
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	for _, f := range files {
		name := filepath.Base(f)
		body, _ := os.ReadFile(f)
		x := geminiExchangeFor(name)
		run := func(pieces ...[]byte) Measurement {
			times := make([]time.Duration, len(pieces))
			for i := range times {
				times[i] = step
			}
			return *geminiRun(x, nil, pieces, times, step)
		}
		whole := run(body)
		for c := 0; c <= len(body); c++ {
			if got := run(body[:c], body[c:]); !reflect.DeepEqual(got, whole) {
				t.Fatalf("%s: split at %d differs:\n got %+v\nwant %+v", name, c, got, whole)
			}
		}
		var bytewise [][]byte
		for i := range body {
			bytewise = append(bytewise, body[i:i+1])
		}
		if got := run(bytewise...); !reflect.DeepEqual(got, whole) {
			t.Fatalf("%s: byte by byte differs:\n got %+v\nwant %+v", name, got, whole)
		}
	}
}

// TestGeminiEventAllocations: once warm, reading an event allocates nothing,
// in either streamed framing.
func TestGeminiEventAllocations(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
	}{
		{"alt=sse event", "sse_text.sse"},
		{"array element", "array_text.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pieces := geminiPieces(tt.fixture, testdata(t, "gemini", tt.fixture))
			mt := geminiExchangeFor(tt.fixture).start(newGemini(), Options{}, nil)
			for _, p := range pieces[:2] {
				mt.Write(p, t0.Add(step))
			}
			// The second piece is a whole event (for the array, its
			// separator and element), so it can be fed again and again.
			content := pieces[1]
			allocs := testing.AllocsPerRun(1000, func() {
				mt.Write(content, t0.Add(step))
			})
			if allocs != 0 {
				t.Errorf("%v allocations per event, want 0", allocs)
			}
			if mt.M.Chunks < 1000 {
				t.Errorf("Chunks %d: the repeated event was not read", mt.M.Chunks)
			}
		})
	}
}
