package meter

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

func TestOpenAIResponsesStreams(t *testing.T) {
	tests := []dialectCase{
		{
			name: "text: created, in_progress, added and done events are not tokens; completed without its blank line", fixture: "text.sse",
			firstToken: 4, firstVisible: 4, lastToken: 14, outputEvents: 11,
			usage: Usage{114, 15, 0, -1, 0, UsageReported},
			model: "gpt-5-2025-08-07", id: "resp_68d93041848c819e90d610c34d125a8f03aa6e5a972b3b23",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 19,
		},
		{
			// Event 4 adds the function_call with its name: the first
			// token; the reasoning item added at event 2 is not output.
			name: "hidden reasoning item then function-call name and arguments: output, nothing visible", fixture: "function_call.sse",
			firstToken: 4, firstVisible: -1, lastToken: 16, outputEvents: 13,
			usage: Usage{75, 155, 0, -1, 128, UsageReported},
			model: "gpt-5-2025-08-07", id: "resp_68d9303e1a9c819e8f2c1ab0e64b1e7c03aa6e5a972b3b23",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 20,
		},
		{
			name: "azure reasoning summary deltas are output before the visible text; key order does not matter", fixture: "reasoning_summary.sse",
			firstToken: 4, firstVisible: 17, lastToken: 20, outputEvents: 12,
			usage: Usage{38, 412, 0, -1, 384, UsageReported},
			model: "gpt-5.4-2026-03-05", id: "resp_anonymized_001",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 25,
		},
		{
			name: "response.incomplete is a successful end: finish reason is incomplete_details.reason", fixture: "incomplete.sse",
			firstToken: 6, firstVisible: 6, lastToken: 10, outputEvents: 5,
			usage: Usage{21, 16, 0, -1, 11, UsageReported},
			model: "gpt-5-mini-2025-08-07", id: "resp_0c3f9a7e2b5d4c8f01a6e9b2d7c4f5a8b3e6d9c2f1a4b7e0",
			finish: []string{"max_output_tokens"}, outcome: OutcomeCompleted, chunks: 15,
		},
		{
			name: "error event then response.failed: the error's type wins", fixture: "failed_quota.sse",
			firstToken: -1, firstVisible: -1, lastToken: -1,
			usage: Usage{-1, -1, -1, -1, -1, UsageAbsent},
			model: "gpt-5-2025-08-07", id: "resp_68e0a2b1c3d4819e8f7a6b5c4d3e2f1003aa6e5a972b3b23",
			finish: []string{"error"}, outcome: OutcomeUpstreamError, errorType: "insufficient_quota", chunks: 4,
		},
		{
			name: "response.failed without an error event: its error code", fixture: "failed_only.sse",
			firstToken: -1, firstVisible: -1, lastToken: -1,
			usage: Usage{-1, -1, -1, -1, -1, UsageAbsent},
			model: "gpt-4.1-mini-2025-04-14", id: "resp_67ca0d1e5f2c8190b1b5d7d0e2ad4f5a0c1e6a3b9f8d7c6e",
			finish: []string{"error"}, outcome: OutcomeThrottled, errorType: "rate_limit_exceeded", chunks: 3,
		},
		{
			name: "keepalive events are chunks, not tokens", fixture: "keepalive.sse",
			firstToken: 6, firstVisible: 6, lastToken: 8, outputEvents: 2,
			usage: Usage{5120, 6, 4864, -1, 0, UsageReported},
			model: "gpt-5-codex", id: "resp_0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 13,
		},
		{
			name: "documented top-level error event: code is the type, stream ends there", fixture: "error_toplevel.sse",
			firstToken: 4, firstVisible: 4, lastToken: 5, outputEvents: 2,
			usage: Usage{-1, 3, -1, -1, -1, UsageEstimated},
			model: "gpt-4o-2024-08-06", id: "resp_5f4e3d2c1b0a99887766554433221100ffeeddccbbaa9988",
			outcome: OutcomeUpstreamError, errorType: "server_error", chunks: 7,
		},
		{
			name: "stream cut before a terminal event is truncated, model and id from response.created", fixture: "truncated.sse",
			firstToken: 4, firstVisible: 4, lastToken: 7, outputEvents: 4,
			usage: Usage{-1, 4, -1, -1, -1, UsageEstimated},
			model: "gpt-4.1-2025-04-14", id: "resp_7e6d5c4b3a29180f7e6d5c4b3a29180f7e6d5c4b3a29180f",
			outcome: OutcomeTruncated, errorType: "truncated", chunks: 8,
		},
		{
			name: "refusal deltas are visible output", fixture: "refusal.sse",
			firstToken: 4, firstVisible: 4, lastToken: 12, outputEvents: 9,
			usage: Usage{40, 10, 0, -1, 0, UsageReported},
			model: "gpt-4o-2024-08-06", id: "resp_1122334455667788990011223344556677889900aabbccdd",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 17,
		},
		{
			// Event 4 adds the custom_tool_call with its name: the first
			// token.
			name: "custom tool name and input deltas are output, not visible", fixture: "custom_tool.sse",
			firstToken: 4, firstVisible: -1, lastToken: 9, outputEvents: 6,
			usage: Usage{311, 74, 0, -1, 64, UsageReported},
			model: "gpt-5-2025-08-07", id: "resp_68f1c0de5a7c81a0b7f3e2d1c0b9a8f7e6d5c4b3a2918070",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 13,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{200, "text/event-stream; charset=utf-8", "/v1/responses"}.start(openAIResponses{}, Options{}, []byte(`{"model":"gpt-5","stream":true}`))
			m := replayPieces(mt, events(testdata(t, "responses", tt.fixture)))
			checkStream(t, m, tt)
			if m.OutputEvents != tt.outputEvents {
				t.Errorf("OutputEvents = %d, want %d", m.OutputEvents, tt.outputEvents)
			}
			if m.Operation != "chat" || m.Dialect != "openai_responses" {
				t.Errorf("operation %q, dialect %q", m.Operation, m.Dialect)
			}
		})
	}
}

func TestOpenAIResponsesBodies(t *testing.T) {
	tests := []dialectCase{
		{
			name: "non-streamed response: usage with cached and reasoning tokens", fixture: "response.json", status: 200,
			usage: Usage{1336, 254, 1152, -1, 192, UsageReported},
			model: "o4-mini-2025-04-16", id: "resp_68d94ff1e2b0819c9f3a7bd2c1e0f45d0b6a8c3e2f1d9a7b",
			finish: []string{"stop"}, outcome: OutcomeCompleted,
		},
		{
			name: "compatible server with usage null: text and arguments estimated", fixture: "response_no_usage.json", status: 200,
			usage: Usage{-1, 26, -1, -1, -1, UsageEstimated},
			model: "Qwen/Qwen3-4B", id: "resp_local_5b2c",
			finish: []string{"stop"}, outcome: OutcomeCompleted,
		},
		{
			name: "404 error body: the status is the error type, no counts", fixture: "error_404.json", status: 404,
			usage:   Usage{-1, -1, -1, -1, -1, UsageAbsent},
			outcome: OutcomeUpstreamError, errorType: "404",
		},
		{
			name: "error object in a 200 body: its type", fixture: "error_404.json", status: 200,
			usage:   Usage{-1, -1, -1, -1, -1, UsageAbsent},
			outcome: OutcomeUpstreamError, errorType: "invalid_request_error",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{tt.status, "application/json", "/v1/responses"}.start(openAIResponses{}, Options{}, []byte(`{"model":"o4-mini","max_output_tokens":300,"temperature":0.2,"top_p":0.9}`))
			m := readInPieces(mt, testdata(t, "responses", tt.fixture), 100)
			checkBody(t, m, tt)
			want := Request{Model: "o4-mini", MaxTokens: 300, HasMaxTokens: true, Temperature: 0.2, HasTemperature: true, TopP: 0.9, HasTopP: true}
			if !reflect.DeepEqual(m.Request, want) {
				t.Errorf("request = %+v, want %+v", m.Request, want)
			}
		})
	}
}

func TestOpenAIResponsesRequest(t *testing.T) {
	tests := []requestCase{
		{"all parameters", `{"model":"gpt-5","input":"hi","stream":true,"max_output_tokens":500,"temperature":0.5,"top_p":1}`,
			Request{Model: "gpt-5", Stream: true, HasStream: true, MaxTokens: 500, HasMaxTokens: true, Temperature: 0.5, HasTemperature: true, TopP: 1, HasTopP: true}},
		{"Chat's max_tokens is not the Responses limit", `{"model":"gpt-5","max_tokens":5,"stream":false}`,
			Request{Model: "gpt-5", HasStream: true}},
		{"prefix of a long body still gives the model", `{"model":"gpt-4.1","input":[{"role":"user","content":"aaaa`, Request{Model: "gpt-4.1"}},
		{"wrong types are ignored", `{"model":["x"],"stream":1,"max_output_tokens":"9"}`, Request{}},
	}
	checkRequests(t, func() Dialect { return openAIResponses{} }, "/v1/responses", tests)
}

func TestOpenAIResponsesDetect(t *testing.T) {
	tests := []struct {
		path string
		want string
	}{
		{"/v1/responses", "openai_responses"},
		{"/openai/v1/responses", "openai_responses"},
		{"/v1/responses/", "openai_responses"},
		{"/v1/responses/resp_123", "openai_chat"},
		{"/v1/chat/completions", "openai_chat"},
	}
	for _, tt := range tests {
		if got := DetectDialect(tt.path).Name; got != tt.want {
			t.Errorf("DetectDialect(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
	d, ok := LookupDialect("openai_responses")
	if !ok || d.Provider != "openai" || d.New().Operation("/v1/responses") != "chat" {
		t.Errorf("registration = %+v %v", d, ok)
	}
}

// TestOpenAIResponsesOdd covers events a lenient reader must survive.
func TestOpenAIResponsesOdd(t *testing.T) {
	tests := []struct {
		name     string
		stream   string
		degraded int64
		outcome  Outcome
		errType  string
		finish   []string
		tokens   int64
	}{
		{"unknown response.* types and empty deltas are not tokens",
			"event: response.image_generation_call.partial_image\ndata: {\"type\":\"response.image_generation_call.partial_image\",\"partial_image_b64\":\"iVBOR\"}\n\n" +
				"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"\"}\n\n" +
				"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"}}\n\n",
			0, OutcomeCompleted, "", []string{"stop"}, 0},
		{"JSON without a type falls back to the event name",
			"event: response.output_text.delta\ndata: {\"delta\":\"Hi\"}\n\nevent: response.completed\ndata: {\"response\":{\"status\":\"completed\"}}\n\n",
			0, OutcomeCompleted, "", []string{"stop"}, 1},
		{"error event without code or error object",
			"event: error\ndata: {\"type\":\"error\",\"message\":\"boom\"}\n\n",
			0, OutcomeUpstreamError, "_OTHER", nil, 0},
		{"incomplete without a reason reports the status",
			"data: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"incomplete_details\":null}}\n\n",
			0, OutcomeCompleted, "", []string{"incomplete"}, 0},
		{"data that is not JSON is a measurement fault",
			"event: keepalive\ndata: keepalive\n\n",
			1, OutcomeTruncated, "truncated", nil, 0},
		{"raw control characters and DEL in a delta do not stall the estimator",
			"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"\bello\x01\x7f\"}\n\n",
			0, OutcomeTruncated, "truncated", nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := New(openAIResponses{}, Options{}, t0)
			mt.Response(200, "text/event-stream", "")
			mt.Write([]byte(tt.stream), t0.Add(step))
			m := mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
			if m.Degraded != tt.degraded || m.Outcome != tt.outcome || m.ErrorType != tt.errType || m.OutputEvents != tt.tokens || !reflect.DeepEqual(m.FinishReasons, tt.finish) {
				t.Errorf("Degraded %d outcome %v %q OutputEvents %d finish %q; want %d %v %q %d %q",
					m.Degraded, m.Outcome, m.ErrorType, m.OutputEvents, m.FinishReasons, tt.degraded, tt.outcome, tt.errType, tt.tokens, tt.finish)
			}
		})
	}
}

// TestOpenAIResponsesSplitInvariance: however the bytes are cut into writes,
// the measurement is the same. Every single split point of every fixture is
// tried, then random multi-way splits.
func TestOpenAIResponsesSplitInvariance(t *testing.T) {
	checkSplitInvariance(t, func() Dialect { return openAIResponses{} }, "responses/*.sse", byExtension)
}

// TestOpenAIResponsesEventAllocations: once warm, reading any event of any
// fixture allocates nothing.
func TestOpenAIResponsesEventAllocations(t *testing.T) {
	checkFixtureAllocations(t, func() Dialect { return openAIResponses{} }, "responses/*.sse", "text/event-stream", events)
}

// TestOpenAIResponsesEstimateAccuracy: with no usage, the estimate from
// output_text.delta events stays close to the o200k tokenizer's count (the
// tokenizer of the models behind this API).
func TestOpenAIResponsesEstimateAccuracy(t *testing.T) {
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	ids, _, err := enc.Encode(accuracyCorpus)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		perDelta int
		maxErr   float64
	}{{1, 0.10}, {4, 0.15}, {16, 0.15}} {
		var b strings.Builder
		for i := 0; i < len(ids); i += tt.perDelta {
			s, _ := enc.Decode(ids[i:min(i+tt.perDelta, len(ids))])
			js, _ := json.Marshal(s)
			fmt.Fprintf(&b, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":%d,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":%s,\"logprobs\":[],\"obfuscation\":\"Zx9\"}\n\n", i+4, js)
		}
		b.WriteString("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"usage\":null}}\n\n")
		mt := New(openAIResponses{}, Options{}, t0)
		mt.Response(200, "text/event-stream", "")
		mt.Write([]byte(b.String()), t0.Add(step))
		m := mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
		rel := float64(m.Usage.OutputTokens-int64(len(ids))) / float64(len(ids))
		t.Logf("%2d tokens per delta: tokenizer %4d  estimate %4d  error %+6.1f%%", tt.perDelta, len(ids), m.Usage.OutputTokens, 100*rel)
		if m.Usage.Source != UsageEstimated || math.Abs(rel) > tt.maxErr {
			t.Errorf("%d per delta: estimate %d (%v) off by %.1f%%", tt.perDelta, m.Usage.OutputTokens, m.Usage.Source, 100*rel)
		}
	}
}
