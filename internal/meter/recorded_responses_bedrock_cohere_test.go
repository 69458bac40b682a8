package meter

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	aws "github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// TestRecordedResponsesProviders reads real recorded Responses API traffic
// of OpenAI, xAI and Azure OpenAI (testdata/recorded/README.md and
// /tmp/recorded-sources-recorded_responses_bedrock_cohere_test.md name each
// file's source, licence and framing). The expected values were written by
// hand from the payloads and docs/telemetry.md, not by running tokentap.
//
// Usage: input_tokens includes input_tokens_details.cached_tokens and
// output_tokens includes output_tokens_details.reasoning_tokens (every
// total_tokens here is input + output), so both are taken as they are;
// these recordings predate input_tokens_details.cache_write_tokens, so
// they report no cache creation (-1; TestRecordedCacheWrites reads it).
// Token events, by the
// openai_responses row: non-empty output text and refusal deltas (visible),
// reasoning summary deltas, function-call arguments and custom tool input,
// and the output_item.added of a function_call (its name); code
// interpreter code deltas and MCP call arguments are generated tool input
// too, by the general rule (the row does not name them; responses.go
// counts them).
func TestRecordedResponsesProviders(t *testing.T) {
	openai := recordedDialect{
		newDialect: func() Dialect { return openAIResponses{} },
		path:       "/v1/responses",
		request:    `{"model":"m","stream":true}`,
		pieces:     eventPieces,
	}
	t.Run("OpenAI", func(t *testing.T) {
		checkRecorded(t, openai, []dialectCase{
			{
				name: "gpt-5-mini web search: hidden reasoning, six searches, then cited text", fixture: "openai/responses_web_search.sse",
				// Reasoning items without a summary and web_search_call
				// items (2 to 45) carry no token; 48 to 180 are the
				// answer's 121 deltas among its annotations.
				firstToken: 48, firstVisible: 48, lastToken: 180, outputEvents: 121,
				usage: Usage{31073, 4416, 3712, -1, 3712, UsageReported},
				// No reasoning text: 4416 - 3712 = 704 were streamed.
				streamed: 704,
				model:    "gpt-5-mini-2025-08-07", id: "resp_0cc96ac817fdc57e00693337060a408198b92bf1f99cf1b8ec",
				finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 185,
			},
			{
				name: "gpt-5-nano code interpreter: the code the model writes is a token, not visible", fixture: "openai/responses_code_interpreter.sse",
				// 149 code_interpreter_call_code deltas (6 to 170, three
				// calls), then 209 output_text deltas (179 to 387).
				firstToken: 6, firstVisible: 179, lastToken: 387, outputEvents: 149 + 209,
				usage:    Usage{6047, 1623, 2944, -1, 1408, UsageReported},
				streamed: 1623 - 1408,
				model:    "gpt-5-nano-2025-08-07", id: "resp_68c2e6efa238819383d5f52a2c2a3baa02d3a5742c7ddae9",
				finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 393,
			},
			{
				name: "gpt-5-mini file search: hidden reasoning, then text", fixture: "openai/responses_file_search.sse",
				firstToken: 13, firstVisible: 13, lastToken: 89, outputEvents: 75,
				usage:    Usage{3737, 621, 2304, -1, 512, UsageReported},
				streamed: 621 - 512,
				model:    "gpt-5-mini-2025-08-07", id: "resp_0459517ad68504ad0068cabfba22b88192836339640e9a765a",
				finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 94,
			},
			{
				name: "gpt-5-mini MCP calls: the mcp_call item the model named is its first token", fixture: "openai/responses_mcp_call.sse",
				// 8 and 16 add mcp_call web_search_exa items
				// ("approval_request_id":null: the model named the call in
				// this response), 10 and 18 stream their arguments whole,
				// 26 to 368 the answer.
				firstToken: 8, firstVisible: 26, lastToken: 368, outputEvents: 2 + 2 + 343,
				usage:    Usage{11791, 963, 0, -1, 512, UsageReported},
				streamed: 963 - 512,
				model:    "gpt-5-mini-2025-08-07", id: "resp_0c72b1033351981300690ccf79c6d88193b7d054f4f83ad50a",
				finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 373,
			},
			{
				name: "gpt-5-mini MCP approval request: the request, name and arguments whole, is the one token event", fixture: "openai/responses_mcp_approval_request.sse",
				// The only output, 8, is an mcp_approval_request item with
				// the generated name create_short_url and its arguments,
				// whole; no reasoning (0).
				firstToken: 8, firstVisible: -1, lastToken: 8, outputEvents: 1,
				usage: Usage{422, 48, 0, -1, 0, UsageReported},
				model: "gpt-5-mini-2025-08-07", id: "resp_04a97b4fce127879006949a837a3a48195b37f26ae73f550c0",
				finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 11,
			},
			{
				name: "gpt-5 image generation: the message text is empty, no event is a token", fixture: "openai/responses_image_generation.sse",
				// Hidden reasoning, an image_generation_call with a
				// partial image, a message whose only text event is an
				// output_text.done with "": 1249 output tokens, none
				// streamed as a delta.
				firstToken: -1, firstVisible: -1, lastToken: -1,
				usage:    Usage{2941, 1249, 1920, -1, 1024, UsageReported},
				streamed: 1249 - 1024,
				model:    "gpt-5-2025-08-07", id: "resp_0df93c0bb83a72f20068c979db26ac819e8b5a444fad3f0d7f",
				finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 16,
			},
			{
				name: "gpt-5-nano insufficient_quota: error event then response.failed", fixture: "openai/responses_error_insufficient_quota.sse",
				// Model and id come from response.created; the error
				// event's error.type is the error type.
				firstToken: -1, firstVisible: -1, lastToken: -1,
				usage: Usage{-1, -1, -1, -1, -1, UsageAbsent},
				model: "gpt-5-nano-2025-08-07", id: "resp_05500b38c2cd9bfc00691c7c9d222481a3b595421266dab424",
				finish: []string{"error"}, outcome: OutcomeUpstreamError, errorType: "insufficient_quota", chunks: 4,
			},
			{
				name: "gpt-5.1-codex-max reasoning summary then a named function call", fixture: "openai/responses_reasoning_summary_function_call.sse",
				// The first of the four responses in the source file. 4 to
				// 35 are reasoning summary deltas (tokens, not visible),
				// 39 adds the function_call calculator (its name: a
				// token), 40 to 52 its arguments. reasoning_tokens is 0
				// with a streamed summary: the summary is not counted
				// there, and output_tokens (28) is what it is.
				firstToken: 4, firstVisible: -1, lastToken: 52, outputEvents: 32 + 1 + 13,
				usage: Usage{134, 28, 0, -1, 0, UsageReported},
				model: "gpt-5.1-codex-max", id: "resp_01830d662ab3856501693c321345c88190b0de00f3b9975691",
				finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 56,
			},
		})
		checkRecordedResponsesBodies(t, []dialectCase{
			{
				name: "gpt-5-mini web search body", fixture: "openai/responses_web_search_body.json",
				usage: Usage{19681, 3773, 3712, -1, 3136, UsageReported},
				model: "gpt-5-mini-2025-08-07", id: "resp_0953eda47ee17412006933306199c88195b44f9cf2986e1d5b",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
			{
				name: "gpt-5-nano code interpreter body", fixture: "openai/responses_code_interpreter_body.json",
				usage: Usage{2283, 1928, 0, -1, 1792, UsageReported},
				model: "gpt-5-nano-2025-08-07", id: "resp_024ee52fc1900767006903bf276a60819395647a8a01d4a3d8",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
			{
				name: "gpt-5-mini MCP call body", fixture: "openai/responses_mcp_call_body.json",
				usage: Usage{6700, 1078, 0, -1, 704, UsageReported},
				model: "gpt-5-mini-2025-08-07", id: "resp_0a4801d792de11eb00690ccb85294c8197b71ddda28cf382e0",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
			{
				name: "gpt-5-nano image generation body", fixture: "openai/responses_image_generation_body.json",
				usage: Usage{3151, 1970, 0, -1, 1920, UsageReported},
				model: "gpt-5-nano-2025-08-07", id: "resp_0a33d15155cb126d0068c96c54970481958484dea31f07926d",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
			{
				// The recording keeps no status; OpenAI answers
				// insufficient_quota with 429 (its error codes guide).
				name: "insufficient_quota error body with its 429: no counts", fixture: "openai/responses_error_insufficient_quota_body.json", status: 429,
				usage: Usage{-1, -1, -1, -1, -1, UsageAbsent}, outcome: OutcomeThrottled, errorType: "429",
			},
			{
				// invalid_request_error is a 400; the status is ours.
				name: "unsupported temperature error body with its 400", fixture: "openai/responses_error_temperature_body.json", status: 400,
				usage: Usage{-1, -1, -1, -1, -1, UsageAbsent}, outcome: OutcomeUpstreamError, errorType: "400",
			},
		})
	})
	t.Run("xAI", func(t *testing.T) {
		// xAI's Responses usage follows OpenAI's arithmetic: 216 + 923 =
		// 1139 (323 reasoning inside the 923), 1875 + 695 = 2570.
		checkRecorded(t, openai, []dialectCase{
			{
				name: "grok-code-fast-1 reasoning summary deltas are tokens, not visible", fixture: "xai/responses_reasoning_summary.sse",
				// 4 to 69 are 66 summary deltas, 75 to 674 are 600 text
				// deltas (923 - 323 = 600 answer tokens).
				firstToken: 4, firstVisible: 75, lastToken: 674, outputEvents: 66 + 600,
				usage: Usage{216, 923, 192, -1, 323, UsageReported},
				// The summary was streamed: all 923 count.
				streamed: 923,
				model:    "grok-code-fast-1", id: "bf3b2b34-79d4-a45c-7be8-d1e5f96386c2",
				finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 679,
			},
			{
				name: "grok-4-fast-reasoning web search: a named web_search_call item is not a token", fixture: "xai/responses_web_search.sse",
				// 2 adds a web_search_call named web_search, already
				// completed (xAI's shape); 6 to 264 are the answer.
				firstToken: 6, firstVisible: 6, lastToken: 264, outputEvents: 259,
				usage:    Usage{1875, 695, 1578, -1, 397, UsageReported},
				streamed: 695 - 397,
				model:    "grok-4-fast-reasoning", id: "98a8d4aa-fc8b-fd93-e673-d5a8f1c9cee8",
				finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 274,
			},
		})
		checkRecordedResponsesBodies(t, []dialectCase{
			{
				name: "grok-4-fast-reasoning web search body", fixture: "xai/responses_web_search_body.json",
				usage: Usage{1941, 583, 947, -1, 380, UsageReported},
				model: "grok-4-fast-reasoning", id: "25de2f84-163c-6e9e-e42e-cd1dbd6f9ed0",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
			{
				name: "grok-4-fast-reasoning code execution body", fixture: "xai/responses_code_execution_body.json",
				usage: Usage{1606, 292, 1235, -1, 190, UsageReported},
				model: "grok-4-fast-reasoning", id: "5138abcf-4c4e-b0ab-7e0b-f4c81b98f455_us-east-1",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
			{
				name: "grok-4-fast-reasoning X search body", fixture: "xai/responses_x_search_body.json",
				usage: Usage{8397, 1805, 608, -1, 580, UsageReported},
				model: "grok-4-fast-reasoning", id: "84c1a8ea-1f29-4a33-1049-0ed3561b0f64_us-east-1",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
		})
	})
	t.Run("Azure", func(t *testing.T) {
		azure := openai
		azure.path = "/openai/v1/responses"
		checkRecorded(t, azure, []dialectCase{
			{
				name: "gpt-5.1 text whole in one delta", fixture: "azure/responses_text.sse",
				firstToken: 4, firstVisible: 4, lastToken: 4, outputEvents: 1,
				usage: Usage{11, 11, 0, -1, 0, UsageReported},
				model: "gpt-5.1", id: "resp_02ce8deeb6197db200698c5196e9588197a572bbea62d38cd1",
				finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 9,
			},
			{
				name: "gpt-5.1-codex-max reasoning summary then a named function call", fixture: "azure/responses_reasoning_summary_function_call.sse",
				// The first of four responses in the source file: 4 to 92
				// summary deltas, 96 adds calculator, 97 to 109 its
				// arguments.
				firstToken: 4, firstVisible: -1, lastToken: 109, outputEvents: 89 + 1 + 13,
				usage: Usage{137, 28, 0, -1, 0, UsageReported},
				model: "gpt-5.1-codex-max", id: "resp_0ca3f598125653cf01693c1f21bf8c819596a078608d16a52d",
				finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 113,
			},
			{
				name: "gpt-4.1-mini web search preview then cited text", fixture: "azure/responses_web_search_preview.sse",
				firstToken: 8, firstVisible: 8, lastToken: 353, outputEvents: 346,
				usage: Usage{5093, 369, 0, -1, 0, UsageReported},
				model: "gpt-4.1-mini", id: "resp_0dcf1a118189f28100691daa5591108194a7dc13f2d6faa80c",
				finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 359,
			},
			{
				name: "gpt-4.1-mini image generation then text", fixture: "azure/responses_image_generation.sse",
				firstToken: 9, firstVisible: 9, lastToken: 36, outputEvents: 28,
				usage: Usage{1979, 67, 0, -1, 0, UsageReported},
				model: "gpt-4.1-mini", id: "resp_0ca0ba552749d18c0069414e505a908197bdd5635c7e764a55",
				finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 41,
			},
			{
				name: "gpt-5-mini code interpreter: code deltas are tokens before the text", fixture: "azure/responses_code_interpreter.sse",
				// 103 code deltas (6 to 108), 222 text deltas (115 to 336).
				firstToken: 6, firstVisible: 115, lastToken: 336, outputEvents: 103 + 222,
				usage:    Usage{2143, 919, 1280, -1, 576, UsageReported},
				streamed: 919 - 576,
				model:    "gpt-5-mini", id: "resp_0ad69c3c5fcb01f60068eba78cacd08193bf9a57724aa55ab8",
				finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 341,
			},
		})
		checkRecordedResponsesBodies(t, []dialectCase{
			{
				name: "gpt-5.1 text body", fixture: "azure/responses_text_body.json",
				usage: Usage{11, 11, 0, -1, 0, UsageReported},
				model: "gpt-5.1", id: "resp_0d6bb044bb6ff37200698c51948054819385e24e2ad931ae6e",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
			{
				name: "gpt-5.1 function call body", fixture: "azure/responses_tool_call_body.json",
				usage: Usage{45, 24, 0, -1, 0, UsageReported},
				model: "gpt-5.1", id: "resp_0a2fa1b539ba14ba00698c519df7a88194874af28c8bfccb12",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
			{
				name: "gpt-5-mini reasoning body", fixture: "azure/responses_reasoning_body.json",
				usage: Usage{564, 101, 0, -1, 64, UsageReported},
				model: "gpt-5-mini", id: "resp_09d58369f84fca7901693cb8381f608196acdaff061ff8de58",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
			{
				name: "gpt-4.1-mini web search preview body", fixture: "azure/responses_web_search_preview_body.json",
				usage: Usage{10188, 405, 0, -1, 0, UsageReported},
				model: "gpt-4.1-mini", id: "resp_015f6a6b41cacae400691daacaec1c8193aa7694e479437a70",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
			{
				name: "gpt-4.1-mini image generation body", fixture: "azure/responses_image_generation_body.json",
				usage: Usage{1977, 65, 0, -1, 0, UsageReported},
				model: "gpt-4.1-mini", id: "resp_0649b3e997efd46d00691e6a4bc16081969734bafe769996de",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
			{
				name: "gpt-5-mini code interpreter body", fixture: "azure/responses_code_interpreter_body.json",
				usage: Usage{1750, 400, 0, -1, 192, UsageReported},
				model: "gpt-5-mini", id: "resp_02ffbc38ae6fca1a0068ec87605cfc819793efdf27e5496675",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
		})
	})
}

// checkRecordedResponsesBodies reads each recorded Responses body whole, in
// 100-byte writes, with its status (200 unless the case says).
func checkRecordedResponsesBodies(t *testing.T, bodies []dialectCase) {
	t.Helper()
	for _, tt := range bodies {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{cmp0(tt.status, 200), "application/json", "/v1/responses"}.start(openAIResponses{}, Options{}, []byte(`{"model":"m"}`))
			checkBody(t, readInPieces(mt, testdata(t, "recorded", tt.fixture), 100), tt)
		})
	}
}

// cmp0 is v, or def when v is zero.
func cmp0(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// TestRecordedBedrock reads real ConverseStream traffic, framed as Bedrock
// sends it (application/vnd.amazon.eventstream): raw recordings of
// pydantic-ai, and Vercel AI SDK recordings re-framed, their payloads the
// inner event objects with the event type in :event-type. Converse
// responses name no model and no id.
//
// Usage: the semconv input is inputTokens + cacheReadInputTokens +
// cacheWriteInputTokens (AWS's inputTokens excludes both); a metadata
// event without the cache fields reports neither (-1); Converse reports no
// reasoning count (-1). Token events, by the bedrock_converse row:
// contentBlockDelta with non-empty text (visible), reasoningContent.text or
// toolUse.input; not messageStart, contentBlockStart, a signature, a
// redactedContent or a toolResult delta.
func TestRecordedBedrock(t *testing.T) {
	streams := []dialectCase{
		{
			name: "claude-opus-4-6 text, re-framed from the Vercel recording", fixture: "bedrock/converse_stream_text.bin",
			path:       "/model/us.anthropic.claude-opus-4-6-v1/converse-stream",
			firstToken: 1, firstVisible: 1, lastToken: 12, outputEvents: 12,
			usage:  Usage{22, 55, -1, -1, -1, UsageReported},
			finish: []string{"end_turn"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"latency", 2.04}}, chunks: 16,
		},
		{
			name: "claude-opus-4-6 reasoning then text; an empty reasoning delta and the signature are nothing", fixture: "bedrock/converse_stream_reasoning.bin",
			path: "/model/us.anthropic.claude-opus-4-6-v1/converse-stream",
			// 1 to 10 reasoning text, 11 "" and 12 the signature, 14 to
			// 22 the answer.
			firstToken: 1, firstVisible: 14, lastToken: 22, outputEvents: 10 + 9,
			usage:  Usage{51, 94, -1, -1, -1, UsageReported},
			finish: []string{"end_turn"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"latency", 2.281}}, chunks: 26,
		},
		{
			name: "nova-micro raw: text then a tool call whose input arrives whole", fixture: "bedrock/converse_stream_tool_use.bin",
			path: "/model/us.amazon.nova-micro-v1%3A0/converse-stream",
			// 1 to 19 text (Nova writes its <thinking> as text), 21
			// contentBlockStart names get_temperature, 22 its input.
			firstToken: 1, firstVisible: 1, lastToken: 22, outputEvents: 19 + 1 + 1,
			usage:  Usage{471, 91, -1, -1, -1, UsageReported},
			finish: []string{"tool_use"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"latency", 0.422}}, chunks: 26,
		},
		{
			name: "nova-2-lite raw: server tool use, its result, then a tool call; the result is not a token", fixture: "bedrock/converse_stream_server_tool_use.bin",
			path: "/model/us.amazon.nova-2-lite-v1%3A0/converse-stream",
			// 1 starts nova_code_interpreter (server_tool_use), 2 its
			// input, 4 and 5 the tool's result, 7 starts final_result, 8
			// its input. The naming contentBlockStarts, 1 and 7, are
			// output: each names a call (docs/telemetry.md).
			firstToken: 1, firstVisible: -1, lastToken: 8, outputEvents: 4,
			usage:  Usage{1002, 59, -1, -1, -1, UsageReported},
			finish: []string{"tool_use"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"latency", 1.6}}, chunks: 12,
		},
		{
			name: "claude-3-7-sonnet raw: redacted reasoning is no text, the answer is", fixture: "bedrock/converse_stream_redacted_reasoning.bin",
			path: "/model/us.anthropic.claude-3-7-sonnet-20250219-v1%3A0/converse-stream",
			// 1 and 3 are redactedContent blocks; 5 to 14 the answer.
			firstToken: 5, firstVisible: 5, lastToken: 14, outputEvents: 10,
			usage:  Usage{92, 253, -1, -1, -1, UsageReported},
			finish: []string{"end_turn"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"latency", 8.069}}, chunks: 18,
		},
		{
			name: "gpt-oss-120b raw: an empty text delta first, reasoning, then text", fixture: "bedrock/converse_stream_empty_text_delta.bin",
			path: "/model/openai.gpt-oss-120b-1%3A0/converse-stream",
			// 1 is text "", 3 the reasoning whole, 5 and 6 the answer.
			firstToken: 3, firstVisible: 5, lastToken: 6, outputEvents: 3,
			usage:  Usage{70, 43, -1, -1, -1, UsageReported},
			finish: []string{"end_turn"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"latency", 0.753}}, chunks: 10,
		},
	}
	for _, tt := range streams {
		t.Run(tt.name, func(t *testing.T) {
			body := testdata(t, "recorded", tt.fixture)
			checkBedrockHeaders(t, body)
			mt := exchange{200, bedrockMediaType, tt.path}.start(DetectDialect(tt.path).New(), Options{}, []byte(`{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`))
			m := replayPieces(mt, bedrockFrames(body))
			checkStream(t, m, tt)
			if tt.outputEvents != 0 && m.OutputEvents != tt.outputEvents {
				t.Errorf("OutputEvents = %d, want %d", m.OutputEvents, tt.outputEvents)
			}
		})
	}
	t.Run("splits", func(t *testing.T) {
		for _, tt := range streams {
			checkRecordedFrameSplits(t, func() Dialect { return newBedrock(false) }, filepath.Join("recorded", tt.fixture))
		}
	})
	bodies := []dialectCase{
		{
			name: "claude-opus-4-6 text body, zero cache counts", fixture: "bedrock/converse_text_body.json", path: "/model/us.anthropic.claude-opus-4-6-v1/converse",
			usage:  Usage{22 + 0 + 0, 57, 0, 0, -1, UsageReported},
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, timings: []ServerTiming{{"latency", 1.864}},
		},
		{
			name: "claude-opus-4-6 reasoning body", fixture: "bedrock/converse_reasoning_body.json", path: "/model/us.anthropic.claude-opus-4-6-v1/converse",
			usage:  Usage{51 + 0 + 0, 78, 0, 0, -1, UsageReported},
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, timings: []ServerTiming{{"latency", 2.202}},
		},
		{
			name: "claude-sonnet-4-5 cache write: input is 2 + 0 + 1322", fixture: "bedrock/converse_cache_write_body.json", path: "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse",
			// totalTokens 1329 = 2 + 1322 + 5: inputTokens leaves the
			// cache out.
			usage:  Usage{2 + 0 + 1322, 5, 0, 1322, -1, UsageReported},
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, timings: []ServerTiming{{"latency", 2.023}},
		},
		{
			name: "claude-sonnet-4-5 cache read: input is 2 + 1322 + 0", fixture: "bedrock/converse_cache_read_body.json", path: "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse",
			usage:  Usage{2 + 1322 + 0, 5, 1322, 0, -1, UsageReported},
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, timings: []ServerTiming{{"latency", 1.99}},
		},
		{
			name: "nova-micro max_tokens stop", fixture: "bedrock/converse_max_tokens_body.json", path: "/model/us.amazon.nova-micro-v1%3A0/converse",
			usage:  Usage{13, 5, -1, -1, -1, UsageReported},
			finish: []string{"max_tokens"}, outcome: OutcomeCompleted, timings: []ServerTiming{{"latency", 0.249}},
		},
		{
			name: "invalid model id: 400 error body, no counts", fixture: "bedrock/converse_error_400_body.json", path: "/model/us.amazon.nova-micro-v1%3A0/converse-stream", status: 400,
			usage: Usage{-1, -1, -1, -1, -1, UsageAbsent}, outcome: OutcomeUpstreamError, errorType: "400",
		},
	}
	for _, tt := range bodies {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{cmp0(tt.status, 200), "application/json", tt.path}.start(DetectDialect(tt.path).New(), Options{}, nil)
			checkBody(t, readInPieces(mt, testdata(t, "recorded", tt.fixture), 100), tt)
		})
	}
}

// checkBedrockHeaders decodes a recording with AWS's own decoder, which
// checks both CRCs of every message, and checks that each message is an
// event with Bedrock's three headers in the order of the raw recordings.
func checkBedrockHeaders(t *testing.T, body []byte) {
	t.Helper()
	dec := aws.NewDecoder()
	r := bytes.NewReader(body)
	for r.Len() > 0 {
		m, err := dec.Decode(r, nil)
		if err != nil {
			t.Fatalf("AWS's decoder: %v", err)
		}
		var names []string
		for _, h := range m.Headers {
			names = append(names, h.Name)
		}
		if want := []string{":event-type", ":content-type", ":message-type"}; !reflect.DeepEqual(names, want) {
			t.Fatalf("headers %q, want %q", names, want)
		}
		if ct, mt := m.Headers.Get(":content-type").String(), m.Headers.Get(":message-type").String(); ct != "application/json" || mt != "event" {
			t.Fatalf(":content-type %q, :message-type %q", ct, mt)
		}
	}
}

// checkRecordedFrameSplits is checkRecordedSplits for a binary event
// stream, which has no blank lines: the measurement of the whole is also
// that of the recording cut in two at every message boundary and one byte
// either side of it, and in many pieces at random.
func checkRecordedFrameSplits(t *testing.T, newDialect func() Dialect, file string) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	whole := measureCuts(newDialect, bedrockMediaType, body, nil)
	for off := 0; off+4 <= len(body); {
		n := int(binary.BigEndian.Uint32(body[off:]))
		if n == 0 {
			t.Fatalf("%s: a zero-length message at %d", file, off)
		}
		off += n
		for _, c := range []int{off - 1, off, off + 1} {
			if c > 0 && c < len(body) {
				if got := measureCuts(newDialect, bedrockMediaType, body, []int{c}); !reflect.DeepEqual(got, whole) {
					t.Fatalf("%s: split at %d differs:\n got %+v\nwant %+v", file, c, got, whole)
				}
			}
		}
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		cuts := randomCuts(rnd, len(body), 64)
		if got := measureCuts(newDialect, bedrockMediaType, body, cuts); !reflect.DeepEqual(got, whole) {
			t.Fatalf("%s: split in %d pieces differs:\n got %+v\nwant %+v", file, len(cuts)+1, got, whole)
		}
	}
}

// TestRecordedCohere reads real recorded Cohere v2 chat traffic (framing:
// see the sources notes). Usage is usage.tokens, what the model processed;
// tokens.input_tokens already includes cached_tokens (448 of 507). Cohere
// reports no cache creation and no reasoning count (-1), and no model in
// the response. billed_units, which leave out the preamble and cached
// input (12 against 507 in the text stream, 7 output against 10), are
// Billed, each row's figures copied by hand from its message-end or body.
//
// Token events: non-empty content-delta text (visible) or thinking,
// tool-plan-delta, tool-call arguments, and, by the general rule of
// docs/telemetry.md (a call's name is its first token), the tool-call-start
// that names a call with "arguments":"", as OpenAI's first tool_calls
// delta. The cohere_chat row does not exclude it, and cohere.go does not
// count it: the two tool-call cases fail on it.
func TestRecordedCohere(t *testing.T) {
	cohere := recordedDialect{
		newDialect: func() Dialect { return cohereChat{} },
		path:       "/v2/chat",
		request:    `{"model":"command-a-03-2025","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		pieces:     eventPieces,
	}
	checkRecorded(t, cohere, []dialectCase{
		{
			name: "text: usage.tokens and cached_tokens as usage, billed_units as the bill", fixture: "cohere/chat_text.sse",
			// 1 opens the block with text "", 2 to 8 the answer.
			firstToken: 2, firstVisible: 2, lastToken: 8, outputEvents: 7,
			usage:  Usage{507, 10, 448, -1, -1, UsageReported},
			billed: new(BilledUsage{12, 7}),
			id:     "321d178c-2c12-44d3-ae42-2f5510f6b1cc",
			finish: []string{"COMPLETE"}, outcome: OutcomeCompleted, chunks: 11,
		},
		{
			name: "thinking content is a token, not visible", fixture: "cohere/chat_reasoning.sse",
			// 2 to 37 thinking, 40 to 48 text.
			firstToken: 2, firstVisible: 40, lastToken: 48, outputEvents: 36 + 9,
			usage:  Usage{1394, 54, 1360, -1, -1, UsageReported},
			billed: new(BilledUsage{8, 50}),
			id:     "c9117d7f-a7e4-499f-b643-a2a1e139687b",
			finish: []string{"COMPLETE"}, outcome: OutcomeCompleted, chunks: 51,
		},
		{
			name: "tool plan then two calls: each tool-call-start names its call", fixture: "cohere/chat_tool_calls.sse",
			// 1 to 27 the plan, 28 names weather, 29 to 35 its
			// arguments, 37 names cityAttractions, 38 to 44 its
			// arguments.
			firstToken: 1, firstVisible: -1, lastToken: 44, outputEvents: 27 + 2 + 14,
			usage:  Usage{1549, 95, 1504, -1, -1, UsageReported},
			billed: new(BilledUsage{119, 44}),
			id:     "2941521a-b87a-45f6-9b0d-235fd66c3025",
			finish: []string{"TOOL_CALL"}, outcome: OutcomeCompleted, chunks: 47,
		},
		{
			name: "a call without arguments: its tool-call-start is the last token", fixture: "cohere/chat_tool_call_no_args.sse",
			// 1 to 12 the plan, 13 names currentTime with arguments ""
			// and no tool-call-delta follows.
			firstToken: 1, firstVisible: -1, lastToken: 13, outputEvents: 12 + 1,
			usage:  Usage{1445, 43, 704, -1, -1, UsageReported},
			billed: new(BilledUsage{46, 14}),
			id:     "66dec7d7-45e6-427c-8fd9-7d6375d12046",
			finish: []string{"TOOL_CALL"}, outcome: OutcomeCompleted, chunks: 16,
		},
	})
	bodies := []dialectCase{
		{
			name: "text body", fixture: "cohere/chat_text_body.json",
			usage: Usage{507, 10, 448, -1, -1, UsageReported}, billed: new(BilledUsage{12, 7}), id: "e7592632-1e3d-424f-b129-bd5f9f980f7b",
			finish: []string{"COMPLETE"}, outcome: OutcomeCompleted,
		},
		{
			name: "MAX_TOKENS body", fixture: "cohere/chat_max_tokens_body.json",
			usage: Usage{506, 5, 448, -1, -1, UsageReported}, billed: new(BilledUsage{11, 4}), id: "039584d9-7236-4ecb-9dd7-f1bed57888bc",
			finish: []string{"MAX_TOKENS"}, outcome: OutcomeCompleted,
		},
		{
			name: "citations body", fixture: "cohere/chat_citations_body.json",
			usage: Usage{1683, 62, 992, -1, -1, UsageReported}, billed: new(BilledUsage{39, 27}), id: "68475c80-574b-4c65-98a4-e81cebab5dce",
			finish: []string{"COMPLETE"}, outcome: OutcomeCompleted,
		},
		{
			name: "thinking body", fixture: "cohere/chat_reasoning_body.json",
			usage: Usage{1394, 582, 1344, -1, -1, UsageReported}, billed: new(BilledUsage{8, 578}), id: "53bcb235-5179-4a91-a578-cb372b5430bc",
			finish: []string{"COMPLETE"}, outcome: OutcomeCompleted,
		},
		{
			name: "two tool calls body", fixture: "cohere/chat_tool_calls_body.json",
			usage: Usage{1549, 103, 992, -1, -1, UsageReported}, billed: new(BilledUsage{119, 52}), id: "f201af17-e24a-4396-8f6a-98e8bf9c3432",
			finish: []string{"TOOL_CALL"}, outcome: OutcomeCompleted,
		},
		{
			name: `tool call with "null" arguments body`, fixture: "cohere/chat_null_args_body.json",
			usage: Usage{1445, 43, 992, -1, -1, UsageReported}, billed: new(BilledUsage{46, 14}), id: "316f0604-ff50-49f6-ba38-c64616e972b4",
			finish: []string{"TOOL_CALL"}, outcome: OutcomeCompleted,
		},
	}
	for _, tt := range bodies {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{200, "application/json", "/v2/chat"}.start(cohereChat{}, Options{}, []byte(`{"model":"command-a-03-2025"}`))
			checkBody(t, readInPieces(mt, testdata(t, "recorded", tt.fixture), 100), tt)
		})
	}
}
