package meter

import (
	"reflect"
	"testing"
)

func TestCohereStreams(t *testing.T) {
	// Cohere's responses never name the model (no row has one): the
	// request's model is all there is.
	tests := []dialectCase{
		{
			name: "text: usage.tokens as usage, billed_units as the bill; message-start and content-start are not tokens", fixture: "text.sse",
			firstToken: 2, firstVisible: 2, lastToken: 12,
			usage: Usage{71, 11, 0, -1, -1, UsageReported}, billed: new(BilledUsage{5, 11}), id: "a8fc192e-4bb8-4e15-ae1f-a174e8b02ae8",
			finish: []string{"COMPLETE"}, outcome: OutcomeCompleted, chunks: 15,
		},
		{
			name: "thinking content is output before the visible text; cached_tokens is cache read inside input", fixture: "reasoning.sse",
			firstToken: 2, firstVisible: 16, lastToken: 24,
			usage: Usage{1394, 54, 1360, -1, -1, UsageReported}, billed: new(BilledUsage{8, 50}), id: "c9117d7f-a7e4-499f-b643-a2a1e139687b",
			finish: []string{"COMPLETE"}, outcome: OutcomeCompleted, chunks: 27,
		},
		{
			name: "tool plan and tool-call arguments are output, not visible; empty start arguments are not", fixture: "tool_call.sse",
			firstToken: 1, firstVisible: -1, lastToken: 15,
			usage: Usage{1549, 95, 1504, -1, -1, UsageReported}, billed: new(BilledUsage{119, 44}), id: "2941521a-b87a-45f6-9b0d-235fd66c3025",
			finish: []string{"TOOL_CALL"}, outcome: OutcomeCompleted, chunks: 18,
		},
		{
			name: "trailing data: [DONE] after message-end is neither an event error nor a fault", fixture: "done_trailer.sse",
			firstToken: 2, firstVisible: 2, lastToken: 3,
			usage: Usage{500, 5, 448, -1, -1, UsageReported}, billed: new(BilledUsage{5, 2}), id: "88492c0b-8227-4256-9b88-1ac956f43de5",
			finish: []string{"MAX_TOKENS"}, outcome: OutcomeCompleted, chunks: 7,
		},
		{
			name: "citation events are not tokens", fixture: "citations.sse",
			firstToken: 2, firstVisible: 2, lastToken: 8,
			usage: Usage{1043, 7, -1, -1, -1, UsageReported}, billed: new(BilledUsage{36, 7}), id: "5e3f1b52-6a0f-4b4e-9d9a-0c7f3b2a1d11",
			finish: []string{"COMPLETE"}, outcome: OutcomeCompleted, chunks: 13,
		},
		{
			name: "finish_reason ERROR with an error message is an upstream error typed ERROR", fixture: "error_end.sse",
			firstToken: 2, firstVisible: 2, lastToken: 3,
			usage: Usage{412, 2, -1, -1, -1, UsageReported}, billed: new(BilledUsage{12, 2}), id: "0f3b7c2e-1d4a-4e8b-9a61-5c2d7e8f9a10",
			finish: []string{"ERROR"}, outcome: OutcomeUpstreamError, errorType: "ERROR", chunks: 5,
		},
		{
			name: "error key before finish_reason still types the error ERROR", fixture: "error_key_order.sse",
			firstToken: -1, firstVisible: -1, lastToken: -1,
			usage: Usage{200, 0, -1, -1, -1, UsageReported}, billed: new(BilledUsage{3, 0}), id: "1a2b3c4d-0000-4000-8000-000000000001",
			finish: []string{"ERROR"}, outcome: OutcomeUpstreamError, errorType: "ERROR", chunks: 2,
		},
		{
			name: "stream cut before message-end is truncated with estimated output", fixture: "truncated.sse",
			firstToken: 2, firstVisible: 2, lastToken: 4,
			usage: Usage{-1, 3, -1, -1, -1, UsageEstimated}, id: "7d1e0a44-9c3b-4f0e-8b2a-6e5f4d3c2b1a",
			outcome: OutcomeTruncated, errorType: "truncated", chunks: 5,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{200, "text/event-stream", "/v2/chat"}.start(cohereChat{}, Options{}, []byte(`{"model":"command-a-03-2025","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			m := replayPieces(mt, events(testdata(t, "cohere", tt.fixture)))
			checkStream(t, m, tt)
			if m.Operation != "chat" || m.Request.Model != "command-a-03-2025" || !m.Request.Stream {
				t.Errorf("Operation %q Request %+v", m.Operation, m.Request)
			}
		})
	}
}

func TestCohereBodies(t *testing.T) {
	tests := []dialectCase{
		{
			name: "non-streamed response: usage.tokens and cached_tokens", fixture: "chat.json", status: 200,
			usage: Usage{507, 10, 448, -1, -1, UsageReported}, billed: new(BilledUsage{12, 7}), id: "e7592632-1e3d-424f-b129-bd5f9f980f7b",
			finish: []string{"COMPLETE"}, outcome: OutcomeCompleted,
		},
		{
			name: "429 trial-key limit: status is the error type, no fake counts", fixture: "error_429.json", status: 429,
			usage: Usage{-1, -1, -1, -1, -1, UsageAbsent}, id: "5c9f1d0e-3b2a-4c6d-8e7f-9a0b1c2d3e4f",
			outcome: OutcomeThrottled, errorType: "429",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{tt.status, "application/json", "/v2/chat"}.start(cohereChat{}, Options{}, []byte(`{"model":"command-r-plus-08-2024","stream":false,"max_tokens":100,"temperature":0.3,"p":0.75,"k":0}`))
			m := readInPieces(mt, testdata(t, "cohere", tt.fixture), 100)
			checkBody(t, m, tt)
			want := Request{Model: "command-r-plus-08-2024", HasStream: true, MaxTokens: 100, HasMaxTokens: true, Temperature: 0.3, HasTemperature: true, TopP: 0.75, HasTopP: true, HasTopK: true} // "k": 0
			if !reflect.DeepEqual(m.Request, want) {
				t.Errorf("request = %+v, want %+v", m.Request, want)
			}
		})
	}
}

func TestCohereRequest(t *testing.T) {
	tests := []requestCase{
		{"p is Cohere's top_p; top_p is not", `{"model":"command-a-03-2025","stream":true,"p":0.9,"top_p":0.1}`,
			Request{Model: "command-a-03-2025", Stream: true, HasStream: true, TopP: 0.9, HasTopP: true}},
		{"stream absent is unknown (Cohere defaults to false)", `{"model":"m","max_tokens":5}`,
			Request{Model: "m", MaxTokens: 5, HasMaxTokens: true}},
		{"wrong types are ignored", `{"model":1,"stream":"yes","p":"high"}`, Request{}},
	}
	checkRequests(t, func() Dialect { return cohereChat{} }, "/v2/chat", tests)
}

// TestCohereBilledUnits: usage.tokens is Usage, what the model processed,
// and billed_units is Billed, what Cohere bills, read alike from a
// stream's message-end and from a body. The first row is the recorded
// text stream's usage (testdata/recorded/cohere/chat_text.sse); without
// billed_units, or with a billed count that is not one, that count stays
// -1 and the bill is not Known.
func TestCohereBilledUnits(t *testing.T) {
	tests := []struct {
		name    string
		usage   string
		input   int64 // Usage.InputTokens
		billed  BilledUsage
		isKnown bool
	}{
		{"recorded: 507 processed, 12 and 7 billed",
			`{"billed_units":{"input_tokens":12,"output_tokens":7},"tokens":{"input_tokens":507,"output_tokens":10},"cached_tokens":448}`,
			507, BilledUsage{12, 7}, true},
		{"no billed_units: -1, usage as reported",
			`{"tokens":{"input_tokens":507,"output_tokens":10},"cached_tokens":448}`,
			507, BilledUsage{-1, -1}, false},
		{"billed_units before tokens, written as floats",
			`{"billed_units":{"input_tokens":12.0,"output_tokens":7.0},"tokens":{"input_tokens":507,"output_tokens":10}}`,
			507, BilledUsage{12, 7}, true},
		{"a zero bill is a bill", `{"billed_units":{"input_tokens":0,"output_tokens":0},"tokens":{"input_tokens":448,"output_tokens":0},"cached_tokens":448}`,
			448, BilledUsage{0, 0}, true},
		{"input billed alone: not Known", `{"billed_units":{"input_tokens":12},"tokens":{"input_tokens":507,"output_tokens":10}}`,
			507, BilledUsage{12, -1}, false},
		{"a negative or non-numeric billed count is no count", `{"billed_units":{"input_tokens":-3,"output_tokens":"7"},"tokens":{"input_tokens":507,"output_tokens":10}}`,
			507, BilledUsage{-1, -1}, false},
		{"other units only (v1's search_units)", `{"billed_units":{"search_units":1},"tokens":{"input_tokens":507,"output_tokens":10}}`,
			507, BilledUsage{-1, -1}, false},
		{"billed_units without tokens: billed, usage unknown", `{"billed_units":{"input_tokens":12,"output_tokens":7}}`,
			-1, BilledUsage{12, 7}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check := func(t *testing.T, m *Measurement) {
				if m.Billed != tt.billed || m.Billed.Known() != tt.isKnown || m.Usage.InputTokens != tt.input {
					t.Errorf("Billed %+v (known %v), input %d; want %+v (%v), %d", m.Billed, m.Billed.Known(), m.Usage.InputTokens, tt.billed, tt.isKnown, tt.input)
				}
			}
			t.Run("stream", func(t *testing.T) {
				mt := exchange{200, "text/event-stream", "/v2/chat"}.start(cohereChat{}, Options{}, []byte(`{"model":"command-a-03-2025","stream":true}`))
				mt.Write([]byte(`event: message-end`+"\n"+`data: {"type":"message-end","delta":{"finish_reason":"COMPLETE","usage":`+tt.usage+`}}`+"\n\n"), t0.Add(step))
				check(t, mt.Finish(t0.Add(2*step), OutcomeUnknown, ""))
			})
			t.Run("body", func(t *testing.T) {
				mt := exchange{200, "application/json", "/v2/chat"}.start(cohereChat{}, Options{}, []byte(`{"model":"command-a-03-2025"}`))
				check(t, readInPieces(mt, []byte(`{"id":"x","finish_reason":"COMPLETE","message":{"role":"assistant","content":[{"type":"text","text":"Hi"}]},"usage":`+tt.usage+`}`), 100))
			})
		})
	}
}

// TestCohereEventTypeFallback: an event whose JSON lacks its type is read
// by its SSE event name.
func TestCohereEventTypeFallback(t *testing.T) {
	mt := New(cohereChat{}, Options{}, t0)
	mt.Response(200, "text/event-stream", "")
	mt.Write([]byte("event: content-delta\ndata: {\"index\":0,\"delta\":{\"message\":{\"content\":{\"text\":\"Hi\"}}}}\n\n"), t0.Add(step))
	mt.Write([]byte("event: message-end\ndata: {\"delta\":{\"finish_reason\":\"COMPLETE\"}}\n\n"), t0.Add(2*step))
	m := mt.Finish(t0.Add(3*step), OutcomeUnknown, "")
	if m.FirstVisibleToken != step || m.Outcome != OutcomeCompleted || m.Usage.OutputTokens != 1 || m.Usage.Source != UsageEstimated || m.Billed != unknownBilled {
		t.Errorf("got FirstVisibleToken %v outcome %v usage %+v billed %+v", m.FirstVisibleToken, m.Outcome, m.Usage, m.Billed)
	}
}

// TestCohereSplitInvariance: every split point of every fixture, then random
// multi-way splits, give the same measurement.
func TestCohereSplitInvariance(t *testing.T) {
	checkSplitInvariance(t, func() Dialect { return cohereChat{} }, "cohere/*", byExtension)
}

// TestCohereEventAllocations: once warm, reading any event of any fixture
// allocates nothing.
func TestCohereEventAllocations(t *testing.T) {
	checkFixtureAllocations(t, func() Dialect { return cohereChat{} }, "cohere/*.sse", "text/event-stream", events)
}
