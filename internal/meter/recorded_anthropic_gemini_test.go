package meter

import (
	"reflect"
	"testing"
)

// TestRecordedAnthropicMessages reads real recorded Messages streams and
// bodies (testdata/recorded/README.md names each file's source and
// licence). The expected values were written by hand from the payloads and
// docs/telemetry.md, not by running tokentap.
//
// Anthropic's input_tokens leaves out the tokens read from and written to
// the prompt cache; semconv's input count includes them, so the input
// expected is input_tokens + cache_read_input_tokens +
// cache_creation_input_tokens of the last usage (message_delta's, which
// repeats the input figures and may change them). message_start's
// output_tokens is a placeholder; message_delta's is cumulative. Anthropic
// reports no reasoning count by docs/telemetry.md ("—, inside
// output_tokens"), so reasoning is -1 throughout, thinking deltas being
// output but not visible.
func TestRecordedAnthropicMessages(t *testing.T) {
	tests := []dialectCase{
		{
			name: "claude-sonnet-4-5 plain text: ping and the empty text block start are not tokens", fixture: "anthropic/text.sse",
			// Event 1 starts the text block with "", 2 is a ping, 3 to 8
			// are the six text deltas ("Hello" … " there anything I can
			// help you with?"), 10 the message_delta with 30.
			firstToken: 3, firstVisible: 3, lastToken: 8, outputEvents: 6,
			usage: Usage{12, 30, 0, 0, -1, UsageReported},
			model: "claude-sonnet-4-5-20250929", id: "msg_01QC4g3HwBThD4BaNtBckFDJ",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, chunks: 12,
		},
		{
			name: "claude-sonnet-4-5 extended thinking: thinking deltas are output, not visible; empty thinking and signature are not tokens", fixture: "anthropic/thinking.sse",
			// Event 1 starts the thinking block, 2 is a ping, 3 to 11 the
			// nine thinking deltas ("The previous" … "= 185"), 12 a
			// thinking_delta of "", 13 the signature_delta; 15 starts the
			// text block, 16 to 18 are "925", " ÷ 5 ", "= 185".
			firstToken: 3, firstVisible: 16, lastToken: 18, outputEvents: 9 + 3,
			usage: Usage{69, 53, 0, 0, -1, UsageReported},
			model: "claude-sonnet-4-5-20250929", id: "msg_01Y6V41gqPaKWEw7iPouH7iW",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, chunks: 22,
		},
		{
			name: "claude-sonnet-5 code execution with prompt cache: input is uncached + read + written, message_delta's figures win", fixture: "anthropic/code_execution_prompt_cache.sse",
			// message_start says 2 uncached and 3068 written; the
			// message_delta (event 42), after two server tool calls, says 6
			// uncached, 6289 read, 3337 written and 198 output: 6 + 6289 +
			// 3337 = 9632. Event 1 starts server_tool_use
			// bash_code_execution (its name, the first token), 3 is its
			// empty partial_json, 4 to 13 its input; 15 is the tool's
			// result (not generated); 17 starts the second call, 18 is
			// "", 19 to 34 its input; 36 the second result; 39 and 40 the
			// text. Its output_tokens_details.thinking_tokens is 0:
			// no thinking, reported.
			firstToken: 1, firstVisible: 39, lastToken: 40, outputEvents: 1 + 10 + 1 + 16 + 2,
			usage: Usage{6 + 6289 + 3337, 198, 6289, 3337, 0, UsageReported},
			model: "claude-sonnet-5", id: "msg_011CdYfpjpVtBoXyXCQD1tQP",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, chunks: 44,
		},
		{
			name: "claude-sonnet-4-5 text then a tool_use with no arguments: its block start is its only token", fixture: "anthropic/tool_no_args.sse",
			// Events 2 and 3 are text, 4 and 6 pings around the text
			// block's stop, 7 starts tool_use updateIssueList, 8 a ping,
			// 9 its only partial_json, "".
			firstToken: 2, firstVisible: 2, lastToken: 7, outputEvents: 2 + 1,
			usage: Usage{565, 48, 0, 0, -1, UsageReported},
			model: "claude-sonnet-4-5-20250929", id: "msg_01GE2RKp1VYsPzdFs3sS9z5S",
			finish: []string{"tool_use"}, outcome: OutcomeCompleted, chunks: 13,
		},
		{
			name: "claude-sonnet-4 web search with citations: citations_delta is not a token, the search results are input", fixture: "anthropic/web_search_citations.sse",
			// Event 1 starts server_tool_use web_search, 2 is "", 3 to 6
			// the query; 8 is the web_search_tool_result; the answer is
			// 19 text blocks from event 10, 56 non-empty text deltas
			// (event 28 is " ", a token) and 14 citations_delta; the
			// first text delta is 11 ("Base"), the last 116 (" retail
			// expansion."). input_tokens grows from message_start's 2037
			// to message_delta's 15665 with the results read.
			firstToken: 1, firstVisible: 11, lastToken: 116, outputEvents: 1 + 4 + 56,
			usage: Usage{15665, 795, 0, 0, -1, UsageReported},
			model: "claude-sonnet-4-20250514", id: "msg_01LHpEgU4KbfgXGVi3UtHQY1",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, chunks: 120,
		},
		{
			name: "claude-sonnet-4-6 programmatic web_fetch: a code_execution call, then a web_fetch block the code made", fixture: "anthropic/web_fetch_programmatic.sse",
			// Event 1 starts server_tool_use code_execution, 3 is "", 4
			// to 20 its code; 22 starts server_tool_use web_fetch with
			// its input whole and "caller" code_execution: the code
			// called it, the model did not write this block (its name is
			// already in the code), yet the docs' table counts every
			// server_tool_use start. Ambiguous, so the output events are
			// not checked. 24 and 26 are the results; 29 to 46 the text.
			firstToken: 1, firstVisible: 29, lastToken: 46,
			usage: Usage{7172, 144, 0, 0, -1, UsageReported},
			model: "claude-sonnet-4-6", id: "msg_01VYExUoD2gEMU8ZX5j5XBEZ",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, chunks: 50,
		},
		{
			name: "claude-sonnet-4-5 MCP connector: the mcp_tool_use block start names a generated call, its first token", fixture: "anthropic/mcp_tool_use.sse",
			// Event 1 starts mcp_tool_use "echo": a tool call's name,
			// which the model generated (docs/telemetry.md: "a tool
			// call's name" is output, its event the call's first token;
			// the Anthropic row lists only tool_use and server_tool_use,
			// written before MCP blocks were considered). 2 is "", 3 to 6
			// the input; 8 the mcp_tool_result (not generated); 11 to 13
			// the text.
			firstToken: 1, firstVisible: 11, lastToken: 13, outputEvents: 1 + 4 + 3,
			usage: Usage{1250, 83, 0, 0, -1, UsageReported},
			model: "claude-sonnet-4-5-20250929", id: "msg_01RNdvgjHoLmx2THF9AVj3KK",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, chunks: 17,
		},
		{
			name: "claude-opus-4-6 server-side compaction: the compaction summary is generated output, not visible", fixture: "anthropic/compaction.sse",
			// Event 1 starts a compaction block, 2 is a ping, 3 the
			// compaction_delta with the whole summary (generated: its
			// sampling is usage.iterations[0], 522 output tokens); 5
			// starts the text block, 6 to 745 are 739 text deltas (286 is
			// a ping). The last message_delta's top-level figures, 612
			// and 2819, are the final iteration's only; the compaction
			// iteration's 60385 input and 522 output tokens are in
			// usage.iterations[0]. Anthropic bills the sum over the
			// iterations, and that is the count.
			firstToken: 3, firstVisible: 6, lastToken: 745, outputEvents: 1 + 739,
			usage: Usage{60385 + 612, 522 + 2819, 0, 0, -1, UsageReported},
			model: "claude-opus-4-6", id: "msg_01WJn2D9FrjipEZ9u51siJHC",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, chunks: 749,
		},
		{
			name: "claude-sonnet-4-6 with the advisor tool: the top-level counts are the executor's, the advisor's tokens are not", fixture: "anthropic/advisor.sse",
			// Event 1 starts server_tool_use "advisor" (its name is the
			// executor's call, its first token), 3 is its only
			// partial_json, ""; 6 is the advisor_tool_result, the
			// advisor's text, which the executor did not generate; 8
			// starts the text block with "", 9 to 123 are 114 text
			// deltas and a ping (71). The message_delta's top-level 4727
			// and 3391 are the two "message" iterations' 1051 + 3676 and
			// 35 + 3356; the advisor_message iteration, 2728 and 3880 of
			// claude-opus-4-7, is another model's
			// (TestRecordedAnthropicOtherModels).
			firstToken: 1, firstVisible: 9, lastToken: 123, outputEvents: 1 + 114,
			usage: Usage{4727, 3391, 0, 0, -1, UsageReported},
			model: "claude-sonnet-4-6", id: "msg_018nU8ajizC7AoofHJbGncAW",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, chunks: 127,
		},
	}
	checkRecorded(t, recordedDialect{
		newDialect: func() Dialect { return newAnthropicMessages() },
		path:       "/v1/messages",
		request:    `{"model":"claude","max_tokens":512,"stream":true}`,
		pieces:     eventPieces,
	}, tests)

	bodies := []dialectCase{
		{
			name: "claude-sonnet-4-5 text body", fixture: "anthropic/text_body.json",
			usage: Usage{12, 29, 0, 0, -1, UsageReported},
			model: "claude-sonnet-4-5-20250929", id: "msg_01VdEjxAP5ahtHKrrRdNBteQ",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted,
		},
		{
			name: "claude-opus-5 thinking body: output_tokens_details.thinking_tokens is the reasoning", fixture: "anthropic/thinking_tokens_body.json",
			// 1699 output tokens, of which thinking_tokens 139: inside
			// output_tokens, so the output is 1699 and the reasoning 139.
			// Real data over the docs, which named no reasoning count
			// for Anthropic.
			usage: Usage{51, 1699, 0, 0, 139, UsageReported},
			model: "claude-opus-5", id: "msg_011CdMNhurHSJCxCC2NB7WYc",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted,
		},
		{
			name: "claude-sonnet-4 web_fetch_tool_result_error inside a 200 body is content, not a failure", fixture: "anthropic/web_fetch_error_result_body.json",
			usage: Usage{1902, 214, 0, 0, -1, UsageReported},
			model: "claude-sonnet-4-20250514", id: "msg_01MT4gZLLHg1yg5d6eo41LJe",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted,
		},
		{
			name: "claude-sonnet-4-6 advisor body: the top-level counts are the executor's", fixture: "anthropic/advisor_body.json",
			// 2414 = 1051 + 1363 and 3200 = 35 + 3165, the two "message"
			// iterations; the advisor_message one, 2728 and 874 of
			// claude-opus-4-7, is not the response model's.
			usage: Usage{2414, 3200, 0, 0, -1, UsageReported},
			model: "claude-sonnet-4-6", id: "msg_01SNJCefkpg3kcMGepX63Dvh",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted,
		},
	}
	for _, tt := range bodies {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{200, "application/json", "/v1/messages"}.start(newAnthropicMessages(), Options{}, []byte(`{"model":"claude","max_tokens":512}`))
			checkBody(t, readInPieces(mt, testdata(t, "recorded", tt.fixture), 100), tt)
		})
	}
}

// TestRecordedAnthropicOtherModels reads the usage of the other models
// that sampled inside a recorded response: the advisor tool's
// sub-inference, an advisor_message entry of usage.iterations naming its
// model, billed at that model's price and left out of the top-level
// counts (docs/telemetry.md, "Anthropic Messages"). The counts are the
// entries' own, written by hand from the payloads; the compaction stream
// has no other model, its compaction iteration being the response
// model's.
func TestRecordedAnthropicOtherModels(t *testing.T) {
	tests := []struct {
		name, fixture string
		streamed      bool
		usage         Usage
		others        []ModelUsage
	}{
		{
			name: "advisor stream", fixture: "anthropic/advisor.sse", streamed: true,
			usage:  Usage{1051 + 3676, 35 + 3356, 0, 0, -1, UsageReported},
			others: []ModelUsage{{"claude-opus-4-7", "advisor_message", 2728, 3880, 0, 0}},
		},
		{
			name: "advisor body", fixture: "anthropic/advisor_body.json",
			usage:  Usage{1051 + 1363, 35 + 3165, 0, 0, -1, UsageReported},
			others: []ModelUsage{{"claude-opus-4-7", "advisor_message", 2728, 874, 0, 0}},
		},
		{
			name: "compaction stream", fixture: "anthropic/compaction.sse", streamed: true,
			usage: Usage{60385 + 612, 522 + 2819, 0, 0, -1, UsageReported},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := testdata(t, "recorded", tt.fixture)
			var m *Measurement
			if tt.streamed {
				mt := exchange{200, "text/event-stream", "/v1/messages"}.start(newAnthropicMessages(), Options{}, []byte(`{"model":"claude","max_tokens":512,"stream":true}`))
				m = replayPieces(mt, eventPieces(tt.fixture, body))
			} else {
				mt := exchange{200, "application/json", "/v1/messages"}.start(newAnthropicMessages(), Options{}, []byte(`{"model":"claude","max_tokens":512}`))
				m = readInPieces(mt, body, 100)
			}
			if m.Usage != tt.usage {
				t.Errorf("Usage = %+v, want %+v", m.Usage, tt.usage)
			}
			if got := m.OtherModelUsage(); len(got) != len(tt.others) || len(got) > 0 && !reflect.DeepEqual(got, tt.others) {
				t.Errorf("OtherModelUsage = %+v, want %+v", got, tt.others)
			}
			if m.Degraded != 0 {
				t.Errorf("Degraded = %d (%s), want 0", m.Degraded, m.DegradedReason)
			}
		})
	}
}

// geminiRequest is the request body the recorded Gemini exchanges are
// served after: the model and the streaming choice are in the path.
const geminiRequest = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`

// TestRecordedGeminiAPI reads real recorded Gemini API streams (alt=sse,
// CRLF) and bodies. Every usageMetadata is cumulative, the last one wins;
// by docs/telemetry.md input is promptTokenCount (cached tokens included)
// + toolUsePromptTokenCount, output is candidatesTokenCount +
// thoughtsTokenCount, reasoning is thoughtsTokenCount (-1 when absent), and
// cache read is cachedContentTokenCount (-1 when absent). In every file
// prompt + candidates + thoughts + tool-use prompt = totalTokenCount.
// Thought parts are reasoning: output, not visible.
func TestRecordedGeminiAPI(t *testing.T) {
	tests := []dialectCase{
		{
			name: "gemini-3-pro-preview text with hidden thinking: 185 thought tokens, no thought parts, a signature-only last part", fixture: "google/text_hidden_thoughts.sse",
			// Events 0 and 1 are text; 2 has "text":"" with a
			// thoughtSignature and the finish. 9 + 23 + 185 = 217.
			firstToken: 0, firstVisible: 0, lastToken: 1, outputEvents: 2,
			usage:    Usage{9, 23 + 185, -1, -1, 185, UsageReported},
			streamed: 23,
			model:    "gemini-3-pro-preview", id: "bH6LaZW8Fp_3nsEPqtaSwQ4",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 3,
		},
		{
			name: "gemini-2.0-flash short reply: early chunks carry usage without candidatesTokenCount", fixture: "google/basic_reply_short.sse",
			// No responseId in this recording. 7 + 10 = 17.
			firstToken: 0, firstVisible: 0, lastToken: 2, outputEvents: 3,
			usage:  Usage{7, 10, -1, -1, -1, UsageReported},
			model:  "gemini-2.0-flash",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 3,
		},
		{
			name: "gemini-2.0-flash citationMetadata on a text chunk is not a token of its own", fixture: "google/citations.sse",
			// 26 text chunks, the citation on event 3. 15 + 1381 = 1396.
			firstToken: 0, firstVisible: 0, lastToken: 25, outputEvents: 26,
			usage:  Usage{15, 1381, -1, -1, -1, UsageReported},
			model:  "gemini-2.0-flash",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 26,
		},
		{
			name: "gemini-2.0-flash RECITATION: the last chunk has a finish and no content", fixture: "google/recitation.sse",
			// Events 0 to 7 are text (redacted by the repository to
			// "text1" … "text8"; the usage, 261 candidates, is the
			// original's); 8 holds only the finish and citations.
			firstToken: 0, firstVisible: 0, lastToken: 7, outputEvents: 8,
			usage:  Usage{9, 261, -1, -1, -1, UsageReported},
			model:  "gemini-2.0-flash",
			finish: []string{"RECITATION"}, outcome: OutcomeCompleted, chunks: 9,
		},
		{
			name: "gemini-2.5-flash code execution: executableCode is output, codeExecutionResult is not, toolUsePromptTokenCount is input", fixture: "google/code_execution.sse",
			// Events 0 and 1 text, 2 executableCode, 3 its result (run by
			// the tool), 4 and 5 text. 21 + 243 input, 126 + 95 output:
			// 21 + 126 + 243 + 95 = 485.
			firstToken: 0, firstVisible: 0, lastToken: 5, outputEvents: 5,
			usage: Usage{21 + 243, 126 + 95, -1, -1, 95, UsageReported},
			model: "gemini-2.5-flash", id: "RUy4aObyJcTujrEPqtKYKQ",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 6,
		},
		{
			name: "gemini-2.5-flash thought summaries, then the answer", fixture: "google/thought_summary.sse",
			// Events 0 to 2 are "thought": true parts, 3 and 4 the
			// answer. 10 + 48 + 540 = 598.
			firstToken: 0, firstVisible: 3, lastToken: 4, outputEvents: 5,
			usage: Usage{10, 48 + 540, -1, -1, 540, UsageReported},
			model: "gemini-2.5-flash", id: "0J-HaJetAqv0jrEPwu-tsQ0",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 5,
		},
		{
			name: "gemini-2.5-flash thought summaries, then a functionCall with empty args: nothing visible", fixture: "google/thought_summary_function_call.sse",
			// Events 0 and 1 are thoughts, 2 the call "now" with
			// "args": {} (its name is output). 38 + 6 + 168 = 212.
			firstToken: 0, firstVisible: -1, lastToken: 2, outputEvents: 3,
			usage: Usage{38, 6 + 168, -1, -1, 168, UsageReported},
			model: "gemini-2.5-flash", id: "48SHaPHpHKbG-8YPtZCawAk",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 3,
		},
		{
			name: "gemini-2.5-flash-image-preview: a content without parts is not a token, the image is the last", fixture: "google/image_after_empty_content.sse",
			// Events 0 to 4 are text, 5 a content with only a role, 6 the
			// inlineData PNG with the finish: generated output (1290 of
			// the 1307 candidate tokens are IMAGE). The docs' Gemini row
			// names no inlineData, but an image is "generated output of
			// any kind". 16 + 1307 = 1323.
			firstToken: 0, firstVisible: 0, lastToken: 6, outputEvents: 6,
			usage: Usage{16, 1307, -1, -1, -1, UsageReported},
			model: "gemini-2.5-flash-image-preview", id: "kLewaKa5ONqI-8YP-c_NuAQ",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 7,
		},
	}
	checkRecorded(t, recordedDialect{
		newDialect: func() Dialect { return newGemini() },
		path:       geminiStreamPath,
		request:    geminiRequest,
		pieces:     geminiPieces,
	}, tests)

	bodies := []dialectCase{
		{
			name: "gemini-3-pro-preview generateContent body: 9 + 28 + 244 = 281", fixture: "google/text_body.json",
			status: 200, path: geminiGeneratePath,
			usage: Usage{9, 28 + 244, -1, -1, 244, UsageReported},
			model: "gemini-3-pro-preview", id: "Un6LacrVMcjUxs0PmJfWoQc",
			finish: []string{"STOP"}, outcome: OutcomeCompleted,
		},
		{
			name: "429 RESOURCE_EXHAUSTED body: the status is the error type, no counts", fixture: "google/error_429_body.json",
			status: 429, path: geminiGeneratePath,
			usage:   Usage{-1, -1, -1, -1, -1, UsageAbsent},
			outcome: OutcomeThrottled, errorType: "429",
		},
	}
	checkRecordedGeminiBodies(t, bodies)
}

// TestRecordedVertexAI reads real recorded Vertex AI Gemini streams and
// bodies, read as the Gemini API's (same format, same rules as
// TestRecordedGeminiAPI). Vertex sends usageMetadata with only trafficType
// before the last chunk: not a count.
func TestRecordedVertexAI(t *testing.T) {
	tests := []dialectCase{
		{
			name: "gemini-2.0-flash: trafficType-only usage until the last chunk", fixture: "vertexai/basic_reply_long.sse",
			// The repository kept 4 of the stream's chunks; the usage of
			// the last is whole: 12 + 1706 = 1718.
			firstToken: 0, firstVisible: 0, lastToken: 3, outputEvents: 4,
			usage: Usage{12, 1706, -1, -1, -1, UsageReported},
			model: "gemini-2.0-flash", id: "By4ZaNWAEPKQhMIP4KS3oAc",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 4,
		},
		{
			name: "gemini-2.5-flash code execution: tool-use prompt tokens are input, thoughts output", fixture: "vertexai/code_execution.sse",
			// Events 0 and 1 text, 2 executableCode, 3 its result, 4 to 6
			// text. 210 + 192 + 371 + 192 = 965. (promptTokensDetails
			// says 20 and toolUsePromptTokensDetails 181: the details
			// leave out 190 tokens each, the counts add up.)
			firstToken: 0, firstVisible: 0, lastToken: 6, outputEvents: 6,
			usage: Usage{210 + 371, 192 + 192, -1, -1, 192, UsageReported},
			model: "gemini-2.5-flash", id: "80y4aM16taeo5g_9-eKJDA",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 7,
		},
		{
			name: "gemini-2.5-flash thought summaries then the answer", fixture: "vertexai/thought_summary.sse",
			// Events 0 to 4 are thoughts, 5 to 7 the answer. 9 + 134 +
			// 1067 = 1210.
			firstToken: 0, firstVisible: 5, lastToken: 7, outputEvents: 8,
			usage: Usage{9, 134 + 1067, -1, -1, 1067, UsageReported},
			model: "gemini-2.5-flash", id: "J5-HaL6iL9OVhMIPkuG6iA8",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 8,
		},
		{
			name: "gemini-3-flash-preview thought, then calls whose arguments stream as partialArgs: an empty stringValue is not a token", fixture: "vertexai/thought_then_partial_args.sse",
			// Event 0 is a thought, 1 read_theme with no args, 2 names
			// read_screen, 3 its "A", 4 a partialArg with stringValue ""
			// (the string's end, no text), 5 an empty functionCall; 6 to
			// 9 and 10 to 13 repeat this for "B" and "C"; 14 is "" with
			// the finish. Tokens: 0, 1, 2, 3, 6, 7, 10, 11.
			// 249 + 58 + 183 = 490.
			firstToken: 0, firstVisible: -1, lastToken: 11, outputEvents: 8,
			usage: Usage{249, 58 + 183, -1, -1, 183, UsageReported},
			// A thought part was streamed: all the output counts.
			streamed: 58 + 183,
			model:    "gemini-3-flash-preview", id: "_vr4aYiWEJnYodAPkujX0QM",
			finish: []string{"STOP"}, outcome: OutcomeCompleted, chunks: 15,
		},
		{
			name: "gemini-1.5-flash SAFETY finish with text: a finish reason, not an error", fixture: "vertexai/finish_reason_safety.sse",
			// The text was redacted by the repository to "<redacted>";
			// no responseId. 10 + 66 = 76.
			firstToken: 0, firstVisible: 0, lastToken: 0, outputEvents: 1,
			usage:  Usage{10, 66, -1, -1, -1, UsageReported},
			model:  "gemini-1.5-flash",
			finish: []string{"SAFETY"}, outcome: OutcomeCompleted, chunks: 1,
		},
		{
			name: "prompt blocked for SAFETY: no candidates, no usage, the block reason is the finish", fixture: "vertexai/prompt_blocked_safety.sse",
			firstToken: -1, firstVisible: -1, lastToken: -1,
			usage:  Usage{-1, -1, -1, -1, -1, UsageAbsent},
			finish: []string{"SAFETY"}, outcome: OutcomeCompleted, chunks: 1,
		},
	}
	checkRecorded(t, recordedDialect{
		newDialect: func() Dialect { return newGemini() },
		path:       geminiVertexPath,
		request:    geminiRequest,
		pieces:     geminiPieces,
	}, tests)

	bodies := []dialectCase{
		{
			name: "gemini-2.5-flash implicit caching: cachedContentTokenCount is inside promptTokenCount", fixture: "vertexai/implicit_caching_body.json",
			// 12013 prompt, 11243 of them cached; 15 + 73 output: 12013
			// + 15 + 73 = 12101. No responseId.
			status: 200, path: vertexGeneratePath,
			usage:  Usage{12013, 15 + 73, 11243, -1, 73, UsageReported},
			model:  "gemini-2.5-flash",
			finish: []string{"STOP"}, outcome: OutcomeCompleted,
		},
		{
			name: "404 NOT_FOUND body of a streaming call: the status is the error type", fixture: "vertexai/error_404_unknown_model_body.json",
			status: 404, path: geminiVertexPath,
			usage:   Usage{-1, -1, -1, -1, -1, UsageAbsent},
			outcome: OutcomeUpstreamError, errorType: "404",
		},
	}
	checkRecordedGeminiBodies(t, bodies)
}

// vertexGeneratePath is Vertex AI's non-streaming method path.
const vertexGeneratePath = "/v1/projects/acme-prod/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent"

// checkRecordedGeminiBodies reads each body whole on its row's status and
// path, as Gemini's JSON answers and error bodies come.
func checkRecordedGeminiBodies(t *testing.T, bodies []dialectCase) {
	t.Helper()
	for _, tt := range bodies {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{tt.status, "application/json; charset=UTF-8", tt.path}.start(newGemini(), Options{}, []byte(geminiRequest))
			checkBody(t, readInPieces(mt, testdata(t, "recorded", tt.fixture), 100), tt)
		})
	}
}
