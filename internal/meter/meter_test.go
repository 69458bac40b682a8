package meter

import (
	"bytes"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// step is the time between two fixture events when tests replay them.
const step = 10 * time.Millisecond

// at returns the offset of the i-th event (0-based) in a replay.
func at(i int) time.Duration { return time.Duration(i+1) * step }

// events cuts an LF-framed fixture into its events, each with its blank
// line, so a replay can give each event its own arrival time.
func events(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.Index(b, []byte("\n\n"))
		if i < 0 {
			out = append(out, b)
			break
		}
		out = append(out, b[:i+2])
		b = b[i+2:]
	}
	return out
}

// replay feeds an OpenAI chat stream event by event, the i-th at at(i), and
// finishes it one step after the last.
func replay(t testing.TB, fixture string, status int, contentType string) *Measurement {
	t.Helper()
	mt := exchange{status, contentType, "/v1/chat/completions"}.start(openAIChat{}, Options{}, []byte(`{"model":"m","stream":true}`))
	return replayPieces(mt, events(testdata(t, "openai", fixture)))
}

func TestOpenAIChatStreams(t *testing.T) {
	const sse = "text/event-stream; charset=utf-8"
	tests := []dialectCase{
		{
			name: "include_usage chunk after finish, role chunk and obfuscation are not tokens", fixture: "chat_usage.sse",
			firstToken: 1, firstVisible: 1, lastToken: 9,
			usage: Usage{19, 9, 0, -1, 0, UsageReported},
			model: "gpt-4o-mini-2024-07-18", id: "chatcmpl-CxT8kq2VhY1nN9q0fJ4mZs7bLwPa",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 13,
		},
		{
			name: "no usage in stream: output estimated", fixture: "chat_no_usage.sse",
			firstToken: 1, firstVisible: 1, lastToken: 17,
			usage: Usage{-1, 17, -1, -1, -1, UsageEstimated},
			model: "gpt-3.5-turbo-0125", id: "chatcmpl-8uyu3UTmh4A6nKzDvuOPFeVUH3159",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 20,
		},
		{
			// Event 0 names the first call (arguments ""): a call's name
			// is output, so its first token.
			name: "parallel tool calls: names and arguments are output, not visible", fixture: "chat_tool_calls.sse",
			firstToken: 0, firstVisible: -1, lastToken: 11,
			usage: Usage{82, 30, 64, -1, 0, UsageReported},
			model: "gpt-4o-2024-08-06", id: "chatcmpl-9Xtj47S36iWNBARmBocBaifGBbjtw",
			finish: []string{"tool_calls"}, outcome: OutcomeCompleted, chunks: 15,
		},
		{
			name: "deepseek reasoning_content is output before the visible answer", fixture: "deepseek_reasoning.sse",
			firstToken: 1, firstVisible: 9, lastToken: 14,
			usage: Usage{12, 14, 0, -1, 8, UsageReported},
			model: "deepseek-reasoner", id: "b1e23612-29d5-4f66-b185-fb61fdde0ac9",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 17,
		},
		{
			name: "n=2 choices keep their own finish reasons", fixture: "chat_n2.sse",
			firstToken: 2, firstVisible: 2, lastToken: 7,
			usage: Usage{24, 6, -1, -1, -1, UsageReported},
			model: "gpt-3.5-turbo-0125", id: "chatcmpl-9P4UJf7DEdyXVro2VOMRMT9qKR0bC",
			finish: []string{"stop", "length"}, outcome: OutcomeCompleted, chunks: 12,
		},
		{
			name: "refusal text is visible output", fixture: "chat_refusal.sse",
			firstToken: 1, firstVisible: 1, lastToken: 9,
			usage: Usage{40, 10, -1, -1, -1, UsageReported},
			model: "gpt-4o-2024-08-06", id: "chatcmpl-Ab12",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 13,
		},
		{
			name: "azure prompt filter chunk has choices [] but is not the usage chunk", fixture: "azure_filter.sse",
			firstToken: 2, firstVisible: 2, lastToken: 9,
			usage: Usage{-1, 8, -1, -1, -1, UsageEstimated},
			model: "gpt-4.1-mini-2025-04-14", id: "chatcmpl-DPTBaSsimU1JbOyrWiQNkSSfOPQE7",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 13,
		},
		{
			name: "mid-stream error after 200, comments are not chunks", fixture: "openrouter_midstream_error.sse",
			firstToken: 3, firstVisible: 3, lastToken: 5,
			usage: Usage{-1, 3, -1, -1, -1, UsageEstimated},
			model: "anthropic/claude-sonnet-4", id: "gen-1767225600-abc",
			finish: []string{"error"}, outcome: OutcomeUpstreamError, errorType: "502", chunks: 6,
			firstChunk: 2,
		},
		{
			name: "stream cut without [DONE] is truncated with partial counts", fixture: "chat_truncated.sse",
			firstToken: 1, firstVisible: 1, lastToken: 4,
			usage: Usage{-1, 4, -1, -1, -1, UsageEstimated},
			model: "gpt-4o-mini-2024-07-18", id: "chatcmpl-trunc1",
			outcome: OutcomeTruncated, errorType: "truncated", chunks: 5,
		},
		{
			name: "hidden reasoning: no token events, usage says 100", fixture: "reasoning_hidden.sse",
			firstToken: -1, firstVisible: -1, lastToken: -1,
			usage: Usage{12, 100, 0, -1, 100, UsageReported},
			model: "gpt-5-nano-2025-08-07", id: "chatcmpl-C4Hq5a6K3RaPMymUv70btQNYv6SvY",
			finish: []string{"length"}, outcome: OutcomeCompleted, chunks: 4,
		},
		{
			name: "vLLM error object", fixture: "vllm_error.sse",
			firstToken: -1, firstVisible: -1, lastToken: -1,
			usage: Usage{-1, -1, -1, -1, -1, UsageAbsent},
			model: "Qwen/Qwen3-4B", id: "chatcmpl-vllm1",
			outcome: OutcomeUpstreamError, errorType: "InternalServerError", chunks: 3,
		},
		{
			name: "llama.cpp [DONE] without blank line still completes", fixture: "llamacpp_done_unterminated.sse",
			firstToken: 1, firstVisible: 3, lastToken: 4,
			usage: Usage{63, 4, 0, -1, -1, UsageReported},
			model: "gpt-oss-20b", id: "chatcmpl-llama1",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 7,
			timings: []ServerTiming{{"prompt", openAICompatMS(4.817)}, {"predicted", openAICompatMS(107.9)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := replay(t, tt.fixture, 200, sse)
			checkStream(t, m, tt)
			if m.MaxChunkGap != step || m.Stalls != 0 {
				t.Errorf("MaxChunkGap %v Stalls %d, want %v 0", m.MaxChunkGap, m.Stalls, step)
			}
		})
	}
}

func TestOpenAIBodies(t *testing.T) {
	tests := []dialectCase{
		{
			name: "non-streamed completion: usage from the body", fixture: "chat_completion.json",
			status: 200, contentType: "application/json",
			usage: Usage{1117, 46, 1024, -1, 0, UsageReported},
			model: "gpt-4o-2024-08-06", id: "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", finish: []string{"stop"}, outcome: OutcomeCompleted,
		},
		{
			name: "429 with JSON error: status is the error type, no fake counts", fixture: "error_429.json",
			status: 429, contentType: "application/json",
			usage:   Usage{-1, -1, -1, -1, -1, UsageAbsent},
			outcome: OutcomeThrottled, errorType: "429",
		},
		{
			name: "500 without content type is still read as an error body", fixture: "error_429.json",
			status: 500, contentType: "",
			usage:   Usage{-1, -1, -1, -1, -1, UsageAbsent},
			outcome: OutcomeUpstreamError, errorType: "500",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{tt.status, tt.contentType, "/v1/chat/completions"}.start(openAIChat{}, Options{}, []byte(`{"model":"gpt-4o","max_tokens":50,"temperature":0.2,"top_p":0.9}`))
			m := readInPieces(mt, testdata(t, "openai", tt.fixture), 100)
			checkBody(t, m, tt)
			if m.Request.Model != "gpt-4o" || m.Request.MaxTokens != 50 || m.Request.Temperature != 0.2 || m.Request.TopP != 0.9 {
				t.Errorf("request = %+v", m.Request)
			}
		})
	}
}

func TestRequestParameters(t *testing.T) {
	tests := []requestCase{
		{"max_completion_tokens wins", `{"model":"o3","stream":true,"max_tokens":10,"max_completion_tokens":20,"stream_options":{"include_usage":true}}`,
			Request{Model: "o3", Stream: true, HasStream: true, MaxTokens: 20, HasMaxTokens: true, IncludeUsage: true}},
		{"stream false is known", `{"model":"m","stream":false,"temperature":0,"top_p":1}`,
			Request{Model: "m", HasStream: true, HasTemperature: true, TopP: 1, HasTopP: true}},
		{"prefix of a long body still gives the model", `{"model":"gpt-4o","messages":[{"role":"user","content":"aaaa`,
			Request{Model: "gpt-4o"}},
		{"not JSON", `model=gpt-4o`, Request{}},
		{"wrong types are ignored", `{"model":42,"stream":"yes","max_tokens":"many"}`, Request{}},
	}
	checkRequests(t, func() Dialect { return openAIChat{} }, "/v1/chat/completions", tests)
}

// TestSplitInvariance: however the bytes are cut into writes, the
// measurement is the same.
func TestSplitInvariance(t *testing.T) {
	checkSplitInvariance(t, func() Dialect { return openAIChat{} }, "openai/*.sse", byExtension)
}

func TestStallsAndGaps(t *testing.T) {
	mt := New(openAIChat{}, Options{StallThreshold: 500 * time.Millisecond}, t0)
	mt.Response(200, "text/event-stream", "")
	evs := events(testdata(t, "openai", "chat_usage.sse"))
	offsets := []time.Duration{100, 300, 350, 1000, 1050, 1100, 2100, 2150, 2200, 2300, 2310, 2320, 2330}
	for i, ev := range evs {
		mt.Write(ev, t0.Add(offsets[i]*time.Millisecond))
	}
	m := mt.Finish(t0.Add(2400*time.Millisecond), OutcomeUnknown, "")
	if m.Stalls != 2 || m.MaxChunkGap != time.Second {
		t.Errorf("Stalls %d MaxChunkGap %v, want 2 and 1s", m.Stalls, m.MaxChunkGap)
	}
	// 9 tokens from 300ms to 2300ms: 8 intervals over 2s.
	if rate, ok := m.OutputTokensPerSecond(); !ok || rate != 4 {
		t.Errorf("OutputTokensPerSecond = %v %v, want 4", rate, ok)
	}
	if tpot, ok := m.TimePerOutputToken(); !ok || tpot != 250*time.Millisecond {
		t.Errorf("TimePerOutputToken = %v %v, want 250ms", tpot, ok)
	}
}

func TestAbortKeepsPartialCounts(t *testing.T) {
	mt := New(openAIChat{}, Options{}, t0)
	mt.Response(200, "text/event-stream", "")
	evs := events(testdata(t, "openai", "chat_usage.sse"))
	for i, ev := range evs[:5] {
		mt.Write(ev, t0.Add(at(i)))
	}
	m := mt.Finish(t0.Add(at(5)), OutcomeClientAbort, "")
	if m.Outcome != OutcomeClientAbort || m.Usage.OutputTokens != 4 || m.Usage.Source != UsageEstimated {
		t.Errorf("got outcome %v usage %+v", m.Outcome, m.Usage)
	}
	if m2 := mt.Finish(t0.Add(time.Hour), OutcomeUnknown, ""); m2.End != at(5) {
		t.Error("Finish is not idempotent")
	}
}

func TestDegradation(t *testing.T) {
	t.Run("oversized event is skipped and counted, later events still read", func(t *testing.T) {
		mt := New(openAIChat{}, Options{MaxEventSize: 700}, t0)
		mt.Response(200, "text/event-stream", "")
		mt.Write([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\""+string(bytes.Repeat([]byte("x"), 1000))+"\"}}]}\n\n"), t0.Add(step))
		mt.Write(testdata(t, "openai", "chat_usage.sse"), t0.Add(2*step))
		m := mt.Finish(t0.Add(3*step), OutcomeUnknown, "")
		if m.Degraded != 1 || m.DegradedReason != "event_over_cap" || m.Usage.OutputTokens != 9 {
			t.Errorf("Degraded %d %q usage %+v", m.Degraded, m.DegradedReason, m.Usage)
		}
	})
	t.Run("body over cap is not read", func(t *testing.T) {
		mt := New(openAIChat{}, Options{MaxBodySize: 100}, t0)
		mt.Response(200, "application/json", "")
		mt.Write(testdata(t, "openai", "chat_completion.json"), t0.Add(step))
		m := mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
		if m.Degraded != 1 || m.Usage.Source != UsageAbsent || m.Outcome != OutcomeCompleted {
			t.Errorf("got %+v", m)
		}
	})
	t.Run("body in an unsupported encoding is counted, not read", func(t *testing.T) {
		mt := New(openAIChat{}, Options{}, t0)
		mt.Response(200, "text/event-stream", "compress")
		mt.Write([]byte{0x1f, 0x8b, 0, 1, 2, 3}, t0.Add(step))
		m := mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
		if m.DegradedReason != "content_encoding" || m.Bytes != 6 || m.Chunks != 0 {
			t.Errorf("got %+v", m)
		}
	})
	t.Run("garbage labelled as an event stream", func(t *testing.T) {
		mt := New(openAIChat{}, Options{}, t0)
		mt.Response(200, "text/event-stream", "")
		mt.Write([]byte("data: \x00\xff\xfe not json\n\ndata: {\"choices\":[{\"delta\":{\"content\":\n\n"), t0.Add(step))
		m := mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
		if m.Degraded != 1 || m.Outcome != OutcomeTruncated {
			t.Errorf("got %+v", m)
		}
	})
}

// TestEventAllocations holds the hot path to its promise: once warm, reading
// any event of any OpenAI-style fixture allocates nothing.
func TestEventAllocations(t *testing.T) {
	checkFixtureAllocations(t, func() Dialect { return openAIChat{} }, "openai/*.sse", "text/event-stream", events)
}
