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

func TestAnthropicStreams(t *testing.T) {
	tests := []dialectCase{
		{
			name: "thinking then text: padded JSON, ping with spaces, signature_delta is not a token", fixture: "thinking_text.sse",
			firstToken: 3, firstVisible: 9, lastToken: 10, outputEvents: 5,
			usage: Usage{52, 62, 0, 0, -1, UsageReported},
			model: "claude-3-7-sonnet-20250219", id: "msg_017MhNmn5nUm4C53tXC7Yh2y",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, chunks: 14,
		},
		{
			// The tool_use start (event 6) names the tool: output.
			name: "tool_use block: its start names the tool and is output, the empty first input_json_delta is not", fixture: "tool_use.sse",
			firstToken: 3, firstVisible: 3, lastToken: 10, outputEvents: 6,
			usage: Usage{384, 89, 0, 0, -1, UsageReported},
			model: "claude-3-5-sonnet-20240620", id: "msg_01Vv7ZA4w8KSjhtbM6mLkwTY",
			finish: []string{"tool_use"}, outcome: OutcomeCompleted, chunks: 14,
		},
		{
			// The tool_use start (event 1) names the tool: the first token.
			name: "forced tool call: output but nothing visible", fixture: "tool_only.sse",
			firstToken: 1, firstVisible: -1, lastToken: 4, outputEvents: 2,
			usage: Usage{472, 55, 0, 0, -1, UsageReported},
			model: "claude-sonnet-4-20250514", id: "msg_01XFDUDYJgAACzvnptvVoYEL",
			finish: []string{"tool_use"}, outcome: OutcomeCompleted, chunks: 8,
		},
		{
			name: "input includes cache creation; message_start output_tokens placeholder is replaced", fixture: "prompt_caching.sse",
			firstToken: 3, firstVisible: 3, lastToken: 4, outputEvents: 2,
			usage: Usage{4 + 1165, 17, 0, 1165, -1, UsageReported},
			model: "claude-3-5-sonnet-20241022", id: "msg_01A9sPUX1wNYU6H3kZdRQvFx",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, chunks: 8,
		},
		{
			name: "message_delta repeating input and cache read: input includes cache read", fixture: "cache_read_repeated_usage.sse",
			firstToken: 2, firstVisible: 2, lastToken: 4, outputEvents: 2,
			usage: Usage{12 + 2048, 30, 2048, 0, -1, UsageReported},
			model: "claude-sonnet-4-5-20250929", id: "msg_01HnnsxLU8QZG3hcPpWRtBse",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, chunks: 8,
		},
		{
			// The server_tool_use start (event 4) names web_search: output.
			name: "server tools: several cumulative message_deltas, last input wins; tool results and citations are not tokens", fixture: "server_tools.sse",
			firstToken: 2, firstVisible: 2, lastToken: 14, outputEvents: 5,
			usage: Usage{10682, 315, 0, 0, -1, UsageReported},
			model: "claude-sonnet-4-20250514", id: "msg_01GcFXn9zHNLb7a4iCbL9pUq",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, chunks: 18,
		},
		{
			name: "redacted_thinking arrives whole and is not a token", fixture: "redacted_thinking.sse",
			firstToken: 5, firstVisible: 5, lastToken: 5, outputEvents: 1,
			usage: Usage{96, 141, 0, 0, -1, UsageReported},
			model: "claude-3-7-sonnet-20250219", id: "msg_01Rk4FhZcQ7aXhVQmD3s2Xj8",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, chunks: 9,
		},
		{
			// Hand-written to the documented format (no recording has
			// both): a compaction sampling, then an advisor call, then the
			// answer. Event 2 is the compaction summary (output, not
			// visible), 4 the advisor call's start, 8 the advisor's
			// result (not the executor's output), 11 and 12 the text.
			// The top-level 1900 (1200 of them read from the cache) and
			// 95 are the two "message" iterations'; the compaction's
			// 48210 and 410 are added; the advisor's are claude-opus-4-7's
			// (TestAnthropicOtherModelsFixture).
			name: "compaction and an advisor call: the compaction is the response model's, the advisor is not", fixture: "compaction_advisor.sse",
			firstToken: 2, firstVisible: 11, lastToken: 12, outputEvents: 4,
			usage: Usage{1900 + 1200 + 48210, 95 + 410, 1200, 0, -1, UsageReported},
			model: "claude-sonnet-4-6", id: "msg_01CompactThenAdvise7Qw2Xe",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, chunks: 16,
		},
		{
			// Input is reported by message_start, output only estimated:
			// the source stays "reported" (see Measurement.Usage).
			name: "overloaded_error event after 200, no message_stop", fixture: "overloaded_midstream.sse",
			firstToken: 2, firstVisible: 2, lastToken: 3, outputEvents: 2,
			usage: Usage{25, 9, 0, 0, -1, UsageEstimated},
			model: "claude-opus-4-1-20250805", id: "msg_01Bq9w938a90dw8q",
			outcome: OutcomeThrottled, errorType: "overloaded_error", chunks: 5,
		},
		{
			name: "stream cut before message_stop is truncated with input kept and output estimated", fixture: "truncated.sse",
			firstToken: 2, firstVisible: 2, lastToken: 4, outputEvents: 3,
			usage: Usage{18, 7, 0, 0, -1, UsageEstimated},
			model: "claude-3-5-haiku-20241022", id: "msg_01TrUnCaTeD5s1d2f3g4h5j6",
			outcome: OutcomeTruncated, errorType: "truncated", chunks: 5,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{200, "text/event-stream; charset=utf-8", "/v1/messages"}.start(newAnthropicMessages(), Options{}, []byte(`{"model":"claude","max_tokens":1024,"stream":true}`))
			m := replayPieces(mt, events(testdata(t, "anthropic", tt.fixture)))
			checkStream(t, m, tt)
			if m.OutputEvents != tt.outputEvents {
				t.Errorf("OutputEvents = %d, want %d", m.OutputEvents, tt.outputEvents)
			}
			if m.Operation != "chat" || m.Dialect != "anthropic_messages" {
				t.Errorf("operation %q, dialect %q", m.Operation, m.Dialect)
			}
		})
	}
}

// TestAnthropicOtherModelsFixture: the advisor sampling of the
// hand-written compaction_advisor.sse is claude-opus-4-7's usage, its
// input the uncached 2300 plus the 500 written to the cache.
func TestAnthropicOtherModelsFixture(t *testing.T) {
	mt := exchange{200, "text/event-stream", "/v1/messages"}.start(newAnthropicMessages(), Options{}, []byte(`{"model":"claude","max_tokens":1024,"stream":true}`))
	m := replayPieces(mt, events(testdata(t, "anthropic", "compaction_advisor.sse")))
	want := []ModelUsage{{"claude-opus-4-7", "advisor_message", 2300 + 500, 650, 0, 500}}
	if got := m.OtherModelUsage(); !reflect.DeepEqual(got, want) {
		t.Errorf("OtherModelUsage = %+v, want %+v", got, want)
	}
	if m.Degraded != 0 {
		t.Errorf("Degraded = %d (%s)", m.Degraded, m.DegradedReason)
	}
}

func TestAnthropicBodies(t *testing.T) {
	tests := []dialectCase{
		{
			name: "non-streamed message: output_tokens is final, input includes cache read", fixture: "message.json", status: 200,
			usage: Usage{37 + 1024, 64, 1024, 0, -1, UsageReported},
			model: "claude-sonnet-4-5-20250929", id: "msg_01QnJ8NmWx5v1kRtLmKBp2sd",
			finish: []string{"max_tokens"}, outcome: OutcomeCompleted,
		},
		{
			name: "compatible server without usage: text and tool input estimated", fixture: "message_no_usage.json", status: 200,
			usage: Usage{-1, 13, -1, -1, -1, UsageEstimated},
			model: "qwen3-coder", id: "msg_local_7f3a",
			finish: []string{"tool_use"}, outcome: OutcomeCompleted,
		},
		{
			name: "429 rate_limit_error body: the status is the error type, no counts", fixture: "error_429.json", status: 429,
			usage:   Usage{-1, -1, -1, -1, -1, UsageAbsent},
			outcome: OutcomeThrottled, errorType: "429",
		},
		{
			name: "529 overloaded body", fixture: "error_529.json", status: 529,
			usage:   Usage{-1, -1, -1, -1, -1, UsageAbsent},
			outcome: OutcomeThrottled, errorType: "529",
		},
		{
			name: "error object in a 200 body keeps the provider's type", fixture: "error_429.json", status: 200,
			usage:   Usage{-1, -1, -1, -1, -1, UsageAbsent},
			outcome: OutcomeThrottled, errorType: "rate_limit_error",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{tt.status, "application/json", "/v1/messages"}.start(newAnthropicMessages(), Options{}, []byte(`{"model":"claude-sonnet-4-5","max_tokens":64,"temperature":0.2,"top_p":0.9}`))
			m := readInPieces(mt, testdata(t, "anthropic", tt.fixture), 100)
			checkBody(t, m, tt)
			want := Request{Model: "claude-sonnet-4-5", MaxTokens: 64, HasMaxTokens: true, Temperature: 0.2, HasTemperature: true, TopP: 0.9, HasTopP: true}
			if !reflect.DeepEqual(m.Request, want) {
				t.Errorf("request = %+v, want %+v", m.Request, want)
			}
		})
	}
}

func TestAnthropicRequest(t *testing.T) {
	tests := []requestCase{
		{"all parameters", `{"model":"claude-opus-4-1","max_tokens":1024,"stream":true,"temperature":1,"top_p":0.95,"top_k":40,"messages":[]}`,
			Request{Model: "claude-opus-4-1", Stream: true, HasStream: true, MaxTokens: 1024, HasMaxTokens: true, Temperature: 1, HasTemperature: true, TopP: 0.95, HasTopP: true, TopK: 40, HasTopK: true}},
		{"OpenAI's max_completion_tokens is not Anthropic's", `{"model":"m","max_completion_tokens":5}`, Request{Model: "m"}},
		{"prefix of a long body still gives the model", `{"model":"claude-3-5-haiku","messages":[{"role":"user","content":"aaaa`, Request{Model: "claude-3-5-haiku"}},
		{"wrong types are ignored", `{"model":1,"stream":"true","max_tokens":"9"}`, Request{}},
		{"not JSON", `model=claude`, Request{}},
	}
	checkRequests(t, func() Dialect { return newAnthropicMessages() }, "/v1/messages", tests)
}

func TestAnthropicDetect(t *testing.T) {
	tests := []struct {
		path string
		want string
	}{
		{"/v1/messages", "anthropic_messages"},
		{"/v1/messages/", "anthropic_messages"},
		{"/anthropic/v1/messages", "anthropic_messages"},
		{"/v1/messages/count_tokens", "openai_chat"},
		{"/v1/threads/thread_abc/messages", "openai_chat"},
	}
	for _, tt := range tests {
		if got := DetectDialect(tt.path).Name; got != tt.want {
			t.Errorf("DetectDialect(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
	d, ok := LookupDialect("anthropic_messages")
	if !ok || d.Provider != "anthropic" || d.New().Operation("/v1/messages") != "chat" {
		t.Errorf("registration = %+v %v", d, ok)
	}
}

// TestAnthropicUnknownAndOdd covers events a lenient reader must survive:
// unknown types, events named only by the SSE field, and data that is not
// JSON.
func TestAnthropicUnknownAndOdd(t *testing.T) {
	tests := []struct {
		name     string
		stream   string
		degraded int64
		outcome  Outcome
		errType  string
		tokens   int64
	}{
		{"unknown event types are chunks, not tokens",
			"event: future_event\ndata: {\"type\":\"future_event\",\"text\":\"x\"}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			0, OutcomeCompleted, "", 0},
		{"JSON without a type falls back to the event name",
			"event: content_block_delta\ndata: {\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\nevent: message_stop\ndata: {}\n\n",
			0, OutcomeCompleted, "", 1},
		{"event: error is a failure even with an odd payload",
			"event: error\ndata: {\"type\":\"message_delta\"}\n\n",
			0, OutcomeUpstreamError, "_OTHER", 0},
		{"data that is not JSON is a measurement fault",
			"event: ping\ndata: ping\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			1, OutcomeCompleted, "", 0},
		{"raw control characters and DEL in a delta do not stall the estimator",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\bello\x01\x7f\"}}\n\n",
			0, OutcomeTruncated, "truncated", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := New(newAnthropicMessages(), Options{}, t0)
			mt.Response(200, "text/event-stream", "")
			mt.Write([]byte(tt.stream), t0.Add(step))
			m := mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
			if m.Degraded != tt.degraded || m.Outcome != tt.outcome || m.ErrorType != tt.errType || m.OutputEvents != tt.tokens {
				t.Errorf("Degraded %d outcome %v %q OutputEvents %d; want %d %v %q %d",
					m.Degraded, m.Outcome, m.ErrorType, m.OutputEvents, tt.degraded, tt.outcome, tt.errType, tt.tokens)
			}
		})
	}
}

// TestAnthropicSplitInvariance: however the bytes are cut into writes, the
// measurement is the same. Every single split point of every fixture is
// tried, then random multi-way splits.
func TestAnthropicSplitInvariance(t *testing.T) {
	checkSplitInvariance(t, func() Dialect { return newAnthropicMessages() }, "anthropic/*.sse", byExtension)
}

// TestAnthropicEventAllocations: once warm, reading any event of any fixture
// allocates nothing.
func TestAnthropicEventAllocations(t *testing.T) {
	checkFixtureAllocations(t, func() Dialect { return newAnthropicMessages() }, "anthropic/*.sse", "text/event-stream", events)
}

// TestAnthropicEstimateAccuracy: with usage absent, the estimate from
// text_delta events stays close to a real tokenizer's count, whatever the
// delta size (Claude's deltas carry several words). o200k stands in for
// Claude's tokenizer, which is not public; the check is that the dialect
// feeds the estimator the right bytes.
func TestAnthropicEstimateAccuracy(t *testing.T) {
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	ids, _, err := enc.Encode(accuracyCorpus)
	if err != nil {
		t.Fatal(err)
	}
	for _, perDelta := range []int{1, 4, 16} {
		var b strings.Builder
		for i := 0; i < len(ids); i += perDelta {
			s, _ := enc.Decode(ids[i:min(i+perDelta, len(ids))])
			js, _ := json.Marshal(s)
			fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%s}    }\n\n", js)
		}
		b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"   }\n\n")
		mt := New(newAnthropicMessages(), Options{}, t0)
		mt.Response(200, "text/event-stream", "")
		mt.Write([]byte(b.String()), t0.Add(step))
		m := mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
		rel := float64(m.Usage.OutputTokens-int64(len(ids))) / float64(len(ids))
		t.Logf("%2d tokens per delta: tokenizer %4d  estimate %4d  error %+6.1f%%", perDelta, len(ids), m.Usage.OutputTokens, 100*rel)
		if m.Usage.Source != UsageEstimated || math.Abs(rel) > 0.15 {
			t.Errorf("%d per delta: estimate %d (%v) off by %.1f%%", perDelta, m.Usage.OutputTokens, m.Usage.Source, 100*rel)
		}
	}
}
