package meter

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"testing"
)

// TestRecordedOpenAIChat reads real recorded Chat Completions traffic of
// providers whose usage arithmetic differs (testdata/recorded/README.md
// names each file's source and licence). The expected values were written
// by hand from the recorded payloads, not by running tokentap.
//
// Output tokens include reasoning tokens whatever the provider's arithmetic
// (measurement.go): OpenAI's completion_tokens already count reasoning
// (Azure's gpt-5-nano: 15 + 78 = 93 total, 64 of the 78 reasoning), xAI's
// do not (grok-3-mini: 12 + 2 + 340 = 354 total), so tokentap's output
// there is completion plus reasoning.
func TestRecordedOpenAIChat(t *testing.T) {
	tests := []dialectCase{
		{
			name: "xAI grok-3-mini: reasoning outside completion_tokens, counted in the output", fixture: "xai/chat_reasoning.sse",
			// Event 0 carries the role and the first reasoning_content;
			// the answer "G", "rok" is events 340 and 341.
			firstToken: 0, firstVisible: 340, lastToken: 341,
			usage:    Usage{12, 2 + 340, 11, -1, 340, UsageReported},
			streamed: 2 + 340,
			model:    "grok-3-mini", id: "f0f0f217-c24d-1fee-5fe3-28fa1d3c8c94",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 345,
		},
		{
			name: "xAI grok-3-mini tool call, whole in one delta, after reasoning", fixture: "xai/chat_tool_call.sse",
			firstToken: 0, firstVisible: -1, lastToken: 227,
			usage: Usage{307, 26 + 227, 306, -1, 227, UsageReported},
			model: "grok-3-mini", id: "7027d986-3c59-a37a-9a5f-50713e01c8a6",
			finish: []string{"tool_calls"}, outcome: OutcomeCompleted, chunks: 231,
		},
		{
			name: "Azure OpenAI gpt-5-nano: reasoning inside completion_tokens, counted once", fixture: "azure/chat_model_router.sse",
			// Event 0 is the prompt filter results (empty id and model),
			// event 1 the role with an empty content.
			firstToken: 2, firstVisible: 2, lastToken: 5,
			usage: Usage{15, 78, 0, -1, 64, UsageReported},
			// No reasoning text: 78 - 64 = 14 were streamed (the four
			// deltas' words and, by the difference, about ten tokens of
			// the answer's framing that no delta shows).
			streamed: 14,
			model:    "gpt-5-nano-2025-08-07", id: "chatcmpl-CYPS1lijGoK8gd9lYzY3r9Sx50nbt",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 9,
		},
		{
			name: "OpenAI gpt-4o tool call: the delta that names it is its first token", fixture: "openai/chat_tool_call.sse",
			// Event 0 has the role and get_weather with "arguments":"";
			// the arguments are events 1 to 7; 8 the finish, 9 the usage.
			firstToken: 0, firstVisible: -1, lastToken: 7,
			usage: Usage{44, 16, -1, -1, 0, UsageReported},
			model: "gpt-4o-2024-08-06", id: "chatcmpl-ABfwERreu9s99xXsVuOWtIB2UOx62",
			finish: []string{"tool_calls"}, outcome: OutcomeCompleted, chunks: 11,
			// EstimateTokens, by hand: get_weather 3 (get, _, weather);
			// the arguments {\" 2, city 1, \":\" 3, New 1, " York" 1,
			// " City" 1, \"} 2.
			estimated: 3 + 11,
		},
		{
			name: "OpenAI gpt-4o two parallel tool calls: the first named after a role-only delta", fixture: "openai/chat_parallel_tool_calls.sse",
			// Event 0 is the role alone; 1 names GetWeatherArgs, 2 to 12
			// are its arguments; 13 names get_stock_price, 14 to 22 its
			// arguments. The estimate of 20 fragments is left to the
			// single call above.
			firstToken: 1, firstVisible: -1, lastToken: 22,
			usage: Usage{149, 60, -1, -1, 0, UsageReported},
			model: "gpt-4o-2024-08-06", id: "chatcmpl-ABfwAwrNePHUgBBezonVC6MX3zd63",
			finish: []string{"tool_calls"}, outcome: OutcomeCompleted, chunks: 26,
		},
	}
	// The estimate is checked only where a case gives it: the reasoning
	// recordings' hundreds of fragments are the heuristic's accuracy tests'
	// business.
	checkRecorded(t, recordedDialect{func() Dialect { return openAIChat{} }, "/v1/chat/completions", `{"model":"m","stream":true}`, eventPieces}, tests)
	bodies := []dialectCase{
		{
			name: "xAI grok-3-mini body: 12 + 1 + 228 = 241", fixture: "xai/chat_reasoning_body.json",
			usage: Usage{12, 1 + 228, 2, -1, 228, UsageReported},
			model: "grok-3-mini", id: "2af5c888-e886-6dcb-7844-95f8fe010b00",
			finish: []string{"stop"}, outcome: OutcomeCompleted,
		},
	}
	for _, tt := range bodies {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{200, "application/json", "/v1/chat/completions"}.start(openAIChat{}, Options{}, []byte(`{"model":"m"}`))
			checkBody(t, readInPieces(mt, testdata(t, "recorded", tt.fixture), 100), tt)
		})
	}
}

// TestRecordedAnthropic reads real recorded Messages streams with a
// tool_use block. The content_block_start that names the tool is generated
// output (docs/telemetry.md): it is an output event, and the name counts
// in the estimate.
func TestRecordedAnthropic(t *testing.T) {
	tests := []dialectCase{
		{
			name: "claude-3-7-sonnet text then tool_use, wire bytes with Anthropic's padding", fixture: "anthropic/tool_runner_next_streaming.sse",
			// Text deltas are events 2, 3 and 5 to 15 (4 is a ping), 17
			// starts get_weather, 18 is its empty partial_json, 19 to 21
			// its input.
			firstToken: 2, firstVisible: 2, lastToken: 21, outputEvents: 13 + 1 + 3,
			usage: Usage{394, 79, 0, 0, -1, UsageReported},
			model: "claude-3-7-sonnet-20250219", id: "msg_01P7nF1bmxyzFZjF8zwbUDBM",
			finish: []string{"tool_use"}, outcome: OutcomeCompleted, chunks: 25,
			// EstimateTokens, by hand: the text 25 ("I" 1, "'" 1, "d be"
			// 2, " happy to check" 3, " the weather" 2, " in" 1, " San
			// Francisco for you." 5, " Let" 1, " me get" 2, " that" 1,
			// " information for you right" 4, " away" 1, "." 1), the name
			// get_weather 3, the input 13 ({\"city\": \"Sa 8,
			// "n Francis" 2, co\"} 3).
			estimated: 25 + 3 + 13,
		},
		{
			name: "claude-haiku-4-5 tool_use first: the block start is the first token", fixture: "anthropic/json_tool.sse",
			// Event 1 starts the tool json, 2 is its empty partial_json, 3
			// a ping, 4 and 5 its input.
			firstToken: 1, firstVisible: -1, lastToken: 5, outputEvents: 3,
			usage: Usage{849, 47, 0, 0, -1, UsageReported},
			model: "claude-haiku-4-5-20251001", id: "msg_01K2JbSUMYhez5RHoK9ZCj9U",
			finish: []string{"tool_use"}, outcome: OutcomeCompleted, chunks: 9,
			// EstimateTokens, by hand: the name json 1; the input 33 + 1:
			// `{\"elements\": [{` 6, `\"location\": ` 5 (a space before
			// an escape is a token of its own), `\"San Francisco\", ` 6,
			// `\"temperature\": 58, ` 7, `\"condition\": ` 5,
			// `\"sunny\"}]` 4; then `}` 1.
			estimated: 1 + 33 + 1,
		},
	}
	checkRecorded(t, recordedDialect{func() Dialect { return newAnthropicMessages() }, "/v1/messages", `{"model":"claude","max_tokens":512,"stream":true}`, eventPieces}, tests)
}

// TestRecordedOpenAIResponses reads a real recorded Responses stream with a
// function call: the output_item.added that names it is generated output.
func TestRecordedOpenAIResponses(t *testing.T) {
	tests := []dialectCase{
		{
			name: "Azure gpt-5.1 function call: output_item.added names it, the first token", fixture: "azure/responses_tool_call.sse",
			// Events 0 and 1 are created and in_progress, 2 adds the
			// function_call weather with "arguments":"", 3 to 8 are the
			// arguments, 9 to 11 the done events and completed.
			firstToken: 2, firstVisible: -1, lastToken: 8, outputEvents: 1 + 6,
			usage: Usage{45, 24, 0, -1, 0, UsageReported},
			model: "gpt-5.1", id: "resp_04041325ab8ae30400698c519fb7fc81979972618138fc336d",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 12,
			// EstimateTokens, by hand: weather 1; {\" 2, location 1,
			// \":\" 3, San 1, " Francisco" 1, \"} 2.
			estimated: 1 + 10,
		},
	}
	checkRecorded(t, recordedDialect{func() Dialect { return openAIResponses{} }, "/openai/v1/responses", `{"model":"gpt-5.1","stream":true}`, eventPieces}, tests)
}

// TestRecordedGemini reads a real recorded Gemini stream whose function
// call arrives whole, name and args in one part: the rule that a call's
// name is output held here before it was written down (geminiCallTokens
// has always counted the name).
func TestRecordedGemini(t *testing.T) {
	tests := []dialectCase{
		{
			name: "gemini-3-pro-preview functionCall whole in the first chunk, CRLF framing", fixture: "google/tool_call.sse",
			firstToken: 0, firstVisible: -1, lastToken: 0, outputEvents: 1,
			usage:    Usage{29, 15 + 45, -1, -1, 45, UsageReported},
			streamed: 15,
			model:    "gemini-3-pro-preview", id: "b36LacjwM668nsEP2tbsgQQ",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 2,
			// EstimateTokens, by hand: weather 1; the args as written,
			// {"location":"San Francisco"}: {" 1, location 1, ":" 2, San
			// 1, " Francisco" 1, "} 1.
			estimated: 1 + 7,
		},
	}
	checkRecorded(t, recordedDialect{func() Dialect { return newGemini() }, geminiStreamPath, `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, geminiPieces}, tests)
}

// recordedDialect is how a dialect's recordings are served: the dialect,
// the request's path and body, and how a recording is cut into one write
// per event.
type recordedDialect struct {
	newDialect    func() Dialect
	path, request string
	pieces        func(fixture string, body []byte) [][]byte
}

// eventPieces cuts a recorded event stream into its events.
func eventPieces(_ string, body []byte) [][]byte { return events(body) }

// checkRecorded replays each recording one event per write and checks it
// as checkStream does, and its output events and estimate where the case
// gives them (0: not checked), and the buffered-stream rule on it
// (checkBufferedReplay), then checks its splits.
func checkRecorded(t *testing.T, d recordedDialect, tests []dialectCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{200, "text/event-stream", d.path}.start(d.newDialect(), Options{}, []byte(d.request))
			m := replayPieces(mt, d.pieces(tt.fixture, testdata(t, "recorded", tt.fixture)))
			checkStream(t, m, tt)
			if tt.outputEvents != 0 && m.OutputEvents != tt.outputEvents {
				t.Errorf("OutputEvents = %d, want %d", m.OutputEvents, tt.outputEvents)
			}
			if tt.estimated != 0 && m.EstimatedOutputTokens != tt.estimated {
				t.Errorf("EstimatedOutputTokens = %d, want %d", m.EstimatedOutputTokens, tt.estimated)
			}
			if tt.streamed != 0 && m.StreamedOutputTokens() != tt.streamed {
				t.Errorf("StreamedOutputTokens = %d, want %d (reasoning streamed: %v)", m.StreamedOutputTokens(), tt.streamed, m.ReasoningStreamed)
			}
			checkBufferedReplay(t, d, tt.fixture, m)
		})
	}
	t.Run("splits", func(t *testing.T) {
		for _, tt := range tests {
			checkRecordedSplits(t, d.newDialect, path.Join("recorded", tt.fixture), "text/event-stream")
		}
	})
}

// checkRecordedSplits is checkSplitInvariance for recordings, which are too
// long to replay once per byte: the measurement of the whole is also that
// of the recording cut in two around every blank line (each side of the
// line feeds that end an event, LF LF or CR LF CR LF, the split of a CR/LF
// pair included), and in many pieces at random.
func checkRecordedSplits(t *testing.T, newDialect func() Dialect, file, contentType string) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	whole := measureCuts(newDialect, contentType, body, nil)
	for start, end := eventEnd(body, 0); start >= 0; start, end = eventEnd(body, end) {
		// Before, inside and after the blank line, and one byte into the
		// next event.
		for c := start; c <= end+1; c++ {
			if c > 0 && c < len(body) {
				if got := measureCuts(newDialect, contentType, body, []int{c}); !reflect.DeepEqual(got, whole) {
					t.Fatalf("%s: split at %d differs:\n got %+v\nwant %+v", file, c, got, whole)
				}
			}
		}
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		cuts := randomCuts(rnd, len(body), 64)
		if got := measureCuts(newDialect, contentType, body, cuts); !reflect.DeepEqual(got, whole) {
			t.Fatalf("%s: split in %d pieces differs:\n got %+v\nwant %+v", file, len(cuts)+1, got, whole)
		}
	}
}

// eventEnd finds the first blank line that ends an event in b at or after
// from, LF LF or CR LF CR LF: its first byte and the byte after it, or -1.
func eventEnd(b []byte, from int) (start, end int) {
	for i := from; i < len(b); i++ {
		switch {
		case bytes.HasPrefix(b[i:], []byte("\r\n\r\n")):
			return i, i + 4
		case bytes.HasPrefix(b[i:], []byte("\n\n")):
			return i, i + 2
		}
	}
	return -1, -1
}
