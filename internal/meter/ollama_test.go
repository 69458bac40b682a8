package meter

import (
	"bytes"
	"reflect"
	"testing"
)

// ollamaLines cuts an NDJSON fixture into its lines, each with its newline,
// so a replay can give each object its own arrival time.
func ollamaLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, b)
			break
		}
		out = append(out, b[:i+1])
		b = b[i+1:]
	}
	return out
}

func TestOllamaStreams(t *testing.T) {
	// The times are of lines, not events. Ollama names no response id: no
	// row has one.
	tests := []dialectCase{
		{
			name: "chat: content is visible, the done object carries counts and nanosecond durations", fixture: "chat.ndjson", path: "/api/chat",
			firstToken: 0, firstVisible: 0, lastToken: 8,
			usage: Usage{26, 10, -1, -1, -1, UsageReported}, model: "llama3.2",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 10,
			timings: []ServerTiming{{"total", 1.23456789}, {"load", 0.023456789}, {"prompt_eval", 0.130079}, {"eval", 0.098765432}},
		},
		{
			name: "generate: response is visible, context array and no done_reason", fixture: "generate.ndjson", path: "/api/generate",
			firstToken: 0, firstVisible: 0, lastToken: 7,
			usage: Usage{23, 9, -1, -1, -1, UsageReported}, model: "dolphin-mixtral:latest",
			outcome: OutcomeCompleted, chunks: 9,
			timings: []ServerTiming{{"total", 0.376468647}, {"load", 0.000758387}, {"prompt_eval", 0.226302}, {"eval", 0.147877}},
		},
		{
			name: "chat: message.thinking is output before the visible answer", fixture: "chat_thinking.ndjson", path: "/api/chat",
			firstToken: 0, firstVisible: 6, lastToken: 10,
			usage: Usage{14, 12, -1, -1, -1, UsageReported}, model: "qwen3:8b",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 12,
			timings: []ServerTiming{{"total", 2.814563312}, {"load", 2.10176425}, {"prompt_eval", 0.412349}, {"eval", 0.19830475}},
		},
		{
			name: "chat: whole tool_calls object is output, not visible", fixture: "chat_tool_calls.ndjson", path: "/api/chat",
			firstToken: 0, firstVisible: -1, lastToken: 2,
			usage: Usage{212, 38, -1, -1, -1, UsageReported}, model: "qwen3.5:35b",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 4,
			timings: []ServerTiming{{"total", 0.912345678}, {"load", 0.051234567}, {"prompt_eval", 0.120456789}, {"eval", 0.702345678}},
		},
		{
			name: "generate: top-level thinking is output, not visible", fixture: "generate_thinking.ndjson", path: "/api/generate",
			firstToken: 0, firstVisible: 2, lastToken: 3,
			usage: Usage{9, 4, -1, -1, -1, UsageReported}, model: "deepseek-r1:1.5b",
			finish: []string{"length"}, outcome: OutcomeCompleted, chunks: 5,
			timings: []ServerTiming{{"total", 0.098765432}, {"load", 0.001234567}, {"prompt_eval", 0.012345678}, {"eval", 0.071234567}},
		},
		{
			name: "load reply: done with reason load, no tokens and no counts", fixture: "load.ndjson", path: "/api/generate",
			firstToken: -1, firstVisible: -1, lastToken: -1,
			usage: Usage{-1, -1, -1, -1, -1, UsageAbsent}, model: "qwen3:30b",
			finish: []string{"load"}, outcome: OutcomeCompleted, chunks: 1,
		},
		{
			name: "fully cached prompt omits prompt_eval_count: input unknown, not 0", fixture: "cached_prompt.ndjson", path: "/api/generate",
			firstToken: 0, firstVisible: 0, lastToken: 2,
			usage: Usage{-1, 4, -1, -1, -1, UsageReported}, model: "llama2",
			outcome: OutcomeCompleted, chunks: 4,
			timings: []ServerTiming{{"total", 0.058113208}, {"load", 0.000612541}, {"eval", 0.050159}},
		},
		{
			name: "error line after 200 is an upstream error with partial counts", fixture: "error_midstream.ndjson", path: "/api/chat",
			firstToken: 0, firstVisible: 0, lastToken: 2,
			usage: Usage{-1, 3, -1, -1, -1, UsageEstimated}, model: "gemma3:27b",
			outcome: OutcomeUpstreamError, errorType: "_OTHER", chunks: 4,
		},
		{
			name: "stream cut mid-line without done is truncated, the partial line is no token", fixture: "truncated.ndjson", path: "/api/chat",
			firstToken: 0, firstVisible: 0, lastToken: 2,
			usage: Usage{-1, 3, -1, -1, -1, UsageEstimated}, model: "llama3.2",
			outcome: OutcomeTruncated, errorType: "truncated", chunks: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{200, "application/x-ndjson", tt.path}.start(ollama{}, Options{}, []byte(`{"model":"llama3.2","messages":[{"role":"user","content":"Why is the sky blue?"}]}`))
			m := replayPieces(mt, ollamaLines(testdata(t, "ollama", tt.fixture)))
			checkStream(t, m, tt)
			if want := map[string]string{"/api/chat": "chat", "/api/generate": "text_completion"}[tt.path]; m.Operation != want {
				t.Errorf("Operation = %q, want %q", m.Operation, want)
			}
		})
	}
}

func TestOllamaBodies(t *testing.T) {
	tests := []dialectCase{
		{
			name: "stream:false body has the same fields as the last line", fixture: "chat_nonstream.json",
			status: 200, contentType: "application/json; charset=utf-8",
			usage: Usage{26, 10, -1, -1, -1, UsageReported}, model: "llama3.2",
			finish: []string{"stop"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"total", 1.23456789}, {"load", 0.023456789}, {"prompt_eval", 0.130079}, {"eval", 0.098765432}},
		},
		{
			name: "NDJSON stream labelled application/json is read line by line", fixture: "chat.ndjson",
			status: 200, contentType: "application/json",
			usage: Usage{26, 10, -1, -1, -1, UsageReported}, model: "llama3.2",
			finish: []string{"stop"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"total", 1.23456789}, {"load", 0.023456789}, {"prompt_eval", 0.130079}, {"eval", 0.098765432}},
		},
		{
			name: "404 unknown model: status is the error type, no fake counts", fixture: "error_404.json",
			status: 404, contentType: "application/json; charset=utf-8",
			usage:   Usage{-1, -1, -1, -1, -1, UsageAbsent},
			outcome: OutcomeUpstreamError, errorType: "404",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{tt.status, tt.contentType, "/api/chat"}.start(ollama{}, Options{}, []byte(`{"model":"llama3.2","stream":false,"options":{"num_predict":128,"temperature":0.2,"top_p":0.9}}`))
			m := readInPieces(mt, testdata(t, "ollama", tt.fixture), 100)
			checkBody(t, m, tt)
			want := Request{Model: "llama3.2", HasStream: true, MaxTokens: 128, HasMaxTokens: true, Temperature: 0.2, HasTemperature: true, TopP: 0.9, HasTopP: true}
			if !reflect.DeepEqual(m.Request, want) {
				t.Errorf("request = %+v, want %+v", m.Request, want)
			}
		})
	}
}

func TestOllamaRequest(t *testing.T) {
	tests := []requestCase{
		{"stream absent means Ollama's default, true", `{"model":"llama3.2","messages":[]}`,
			Request{Model: "llama3.2", Stream: true, HasStream: true}},
		{"options hold the sampling parameters", `{"model":"m","stream":true,"options":{"num_predict":64,"temperature":0,"top_p":1}}`,
			Request{Model: "m", Stream: true, HasStream: true, MaxTokens: 64, HasMaxTokens: true, HasTemperature: true, TopP: 1, HasTopP: true}},
		{"num_predict -1 means no limit", `{"model":"m","options":{"num_predict":-1}}`,
			Request{Model: "m", Stream: true, HasStream: true}},
		{"top-level max_tokens is not Ollama's", `{"model":"m","max_tokens":10,"temperature":0.5}`,
			Request{Model: "m", Stream: true, HasStream: true}},
		{"not JSON", `model=m`, Request{Stream: true, HasStream: true}},
	}
	checkRequests(t, func() Dialect { return ollama{} }, "/api/chat", tests)
}

// TestOllamaDetection checks the paths of the three native dialects in this
// change and their near misses; "" means none of them (other dialects may
// claim the path).
func TestOllamaDetection(t *testing.T) {
	mine := map[string]bool{"ollama": true, "cohere_chat": true, "tgi": true}
	for path, want := range map[string]string{
		"/api/chat":             "ollama",
		"/api/generate":         "ollama",
		"/ollama/api/generate/": "ollama",
		"/v2/chat":              "cohere_chat",
		"/cohere/v2/chat/":      "cohere_chat",
		"/generate_stream":      "tgi",
		"/generate":             "tgi",
		"/tgi/generate":         "tgi",
		"/v1/chat/completions":  "",
		"/api/chat/completions": "",
		"/api/generateX":        "",
		"/api/embed":            "",
		"/v2/chatty":            "",
		"/v1/generate":          "",
		"/x/regenerate":         "",
	} {
		got := DetectDialect(path).Name
		if want == "" && mine[got] || want != "" && got != want {
			t.Errorf("DetectDialect(%q) = %q, want %q", path, got, want)
		}
	}
}

// TestOllamaSplitInvariance: however the bytes are cut into writes, the
// measurement is the same. Every split point of every fixture, as a stream
// and as a body, then random multi-way splits.
func TestOllamaSplitInvariance(t *testing.T) {
	checkSplitInvariance(t, func() Dialect { return ollama{} }, "ollama/*", func(string) []string { return []string{"application/x-ndjson", "application/json"} })
}

// TestOllamaEventAllocations holds the hot path to its promise: once warm,
// reading any line of any fixture allocates nothing.
func TestOllamaEventAllocations(t *testing.T) {
	checkFixtureAllocations(t, func() Dialect { return ollama{} }, "ollama/*.ndjson", "application/x-ndjson", ollamaLines)
}
