package meter

import (
	"bytes"
	"testing"
)

// TestRecordedCacheWrites reads prompt-cache writes from real recorded
// OpenAI-family traffic (SOURCES-openai-family.md names each file's
// source): Chat Completions' prompt_tokens_details.cache_write_tokens and
// the Responses API's input_tokens_details.cache_write_tokens, from
// OpenAI, OpenRouter and Bedrock's OpenAI-compatible endpoint. The
// expected values were written by hand from the payloads.
//
// Arithmetic, from the payloads: prompt_tokens and input_tokens already
// include both the tokens read from the cache and those written to it,
// as semconv's input count does, so they are taken as they are and the
// written tokens become the cache creation count. OpenAI: 4020 prompt
// tokens, 4012 of them written on the first call and read on the second.
// OpenRouter (Claude Sonnet 4.6): 3214 = 3 + 3211 written, then 3329 = 3 +
// 3211 read + 115 written; OpenRouter's own usage.cost prices exactly that
// split (recorded_cost_test.go). Bedrock: 158 input, 43 written.
func TestRecordedCacheWrites(t *testing.T) {
	chat := recordedDialect{
		newDialect: func() Dialect { return openAIChat{} },
		path:       "/v1/chat/completions",
		request:    `{"model":"m","stream":true}`,
		pieces:     eventPieces,
	}
	responses := recordedDialect{
		newDialect: func() Dialect { return openAIResponses{} },
		path:       "/v1/responses",
		request:    `{"model":"m","stream":true}`,
		pieces:     eventPieces,
	}
	t.Run("chat bodies", func(t *testing.T) {
		checkRecordedChatBodies(t, []dialectCase{
			{
				name: "OpenAI gpt-5.6-sol: 4012 of 4020 prompt tokens written", fixture: "openai/chat_cache_write_body.json",
				usage: Usage{4020, 4, 0, 4012, 0, UsageReported},
				model: "gpt-5.6-sol", id: "chatcmpl-E1mBLGr3Ql1FsH8cdc76XdGw3PleH",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
			{
				name: "OpenAI gpt-5.6-sol: the same 4012 read, none written", fixture: "openai/chat_cache_read_body.json",
				usage: Usage{4020, 4, 4012, 0, 0, UsageReported},
				model: "gpt-5.6-sol", id: "chatcmpl-E1mBQt42vYTsKNd5wnyJlT0db7v9S",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
			{
				name: "OpenRouter Claude: 3211 of 3214 written", fixture: "openrouter/chat_cache_write_body.json",
				usage: Usage{3214, 100, 0, 3211, 0, UsageReported},
				model: "anthropic/claude-4.6-sonnet-20260217", id: "gen-1773011155-RKj29WPs25kxzvCwOntV",
				finish: []string{"length"}, outcome: OutcomeCompleted,
			},
			{
				name: "OpenRouter Claude: 3211 read and 115 written of 3329", fixture: "openrouter/chat_cache_read_write_body.json",
				usage: Usage{3329, 53, 3211, 115, 0, UsageReported},
				model: "anthropic/claude-4.6-sonnet-20260217", id: "gen-1773011158-Ce1hHC4Gr81WIraIsgAJ",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
		})
	})
	t.Run("Responses bodies", func(t *testing.T) {
		checkRecordedResponsesBodies(t, []dialectCase{
			{
				name: "OpenAI gpt-5.6-sol: 4012 of 4020 input tokens written", fixture: "openai/responses_cache_write_body.json",
				usage: Usage{4020, 5, 0, 4012, 0, UsageReported},
				model: "gpt-5.6-sol", id: "resp_026af6d29369608b006a5716618c60819bac3694425c3ff9d8",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
			{
				name: "OpenAI gpt-5.6-sol: the same 4012 read, none written", fixture: "openai/responses_cache_read_body.json",
				usage: Usage{4020, 5, 4012, 0, 0, UsageReported},
				model: "gpt-5.6-sol", id: "resp_0dec647b9ff1df8d006a5716666d8c8199aaf0491f9a22e34d",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
			{
				name: "OpenRouter gpt-5.6-sol: 4012 of 4020 written", fixture: "openrouter/responses_cache_write_body.json",
				usage: Usage{4020, 5, 0, 4012, 0, UsageReported},
				model: "openai/gpt-5.6-sol", id: "gen-1784286312-3R0SU4Mb8ucOpEJ79d2o",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
			{
				// OpenRouter leaves cache_write_tokens out when nothing
				// was written: not reported, not 0.
				name: "OpenRouter gpt-5.6-sol: 4012 read, no cache_write_tokens member", fixture: "openrouter/responses_cache_read_body.json",
				usage: Usage{4020, 5, 4012, -1, 0, UsageReported},
				model: "openai/gpt-5.6-sol", id: "gen-1784286313-o0LDhOFaHL3xExqbXInR",
				finish: []string{"stop"}, outcome: OutcomeCompleted,
			},
		})
	})
	t.Run("Responses streams", func(t *testing.T) {
		checkRecorded(t, responses, []dialectCase{
			{
				name: "Bedrock gpt-5.6-luna: data before event, hidden reasoning, 43 written", fixture: "bedrock-mantle/responses_tool_calls_cache_write.sse",
				// Each event is its data: line, then its event: line.
				// 2 adds a reasoning item without a summary, 6 to 21 are
				// the answer's deltas, 25 response.completed: 158 input,
				// 43 written; 32 output, 10 reasoning never streamed.
				firstToken: 6, firstVisible: 6, lastToken: 21, outputEvents: 16,
				usage:    Usage{158, 32, 0, 43, 10, UsageReported},
				streamed: 32 - 10,
				model:    "openai.gpt-5.6-luna", id: "resp_xk6l63oaoqbapz5kikx3sm3ptssqjxa6tqvccjoh7iyb73tl5mja",
				finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 26,
			},
		})
	})
	t.Run("chat streams", func(t *testing.T) {
		checkRecorded(t, chat, []dialectCase{
			{
				name: "OpenRouter Claude stream: comments, then cache_write_tokens 0 is a count of 0", fixture: "openrouter/chat_stream_cost.sse",
				// 0 to 2 are ": OPENROUTER PROCESSING" comments, 3 the
				// answer whole, 4 the finish, 5 the usage chunk (254 +
				// 5, nothing read or written, with OpenRouter's cost),
				// 6 [DONE].
				firstChunk: 3, firstToken: 3, firstVisible: 3, lastToken: 3, outputEvents: 1,
				usage: Usage{254, 5, 0, 0, 0, UsageReported},
				model: "anthropic/claude-4.6-sonnet-20260217", id: "gen-1773012759-4u9w7As08eMtL75bWtu8",
				finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 4,
			},
		})
	})
}

// TestRecordedOpenRouterResponses reads OpenRouter's Responses API stream,
// recorded raw: SSE comments first, data: lines without event: lines, and
// a data: [DONE] after response.completed, which the Responses API does
// not have. The [DONE] is an event (a chunk) but neither a fault nor an
// end: response.completed ended the stream.
func TestRecordedOpenRouterResponses(t *testing.T) {
	responses := recordedDialect{
		newDialect: func() Dialect { return openAIResponses{} },
		path:       "/v1/responses",
		request:    `{"model":"openai/gpt-oss-20b","stream":true}`,
		pieces:     eventPieces,
	}
	checkRecorded(t, responses, []dialectCase{
		{
			name: "gpt-oss-20b: reasoning text, the answer, response.completed, then [DONE]", fixture: "openrouter/responses_reasoning_text_done.sse",
			// 0 is the comment; 1 response.created; 3 adds the reasoning
			// item; 5 to 30 are its 26 reasoning_text deltas; 31 adds the
			// message; 33 its one delta, "4"; 40 response.completed (78
			// + 37 = 115, 22 reasoning, no cache write reported); 41
			// [DONE].
			firstChunk: 1, firstToken: 5, firstVisible: 33, lastToken: 33, outputEvents: 26 + 1,
			usage: Usage{78, 37, 0, -1, 22, UsageReported},
			model: "openai/gpt-oss-20b", id: "gen-1764265411-Fu1iEX7h5MRWiL79lb94",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 41,
		},
	})
}

// TestDoneIsHarmlessInEveryDialect appends data: [DONE], which
// OpenAI-style servers and gateways put after streams of any dialect, to
// real recordings (and, for TGI, which has none, to a fixture written to
// its format) of every SSE dialect without a [DONE] of its own: the
// measurement is the same but for one more chunk, with no fault; and a
// stream cut before its terminator stays truncated with it, because only
// the dialect's own terminator ends a stream. Bedrock's binary event
// stream cannot carry one, and Ollama's NDJSON has no SSE data lines.
func TestDoneIsHarmlessInEveryDialect(t *testing.T) {
	tests := []struct {
		name, file string
		dialect    func() Dialect
	}{
		{"Responses, OpenAI", "recorded/openai/responses_file_search.sse", func() Dialect { return openAIResponses{} }},
		{"Responses, Bedrock", "recorded/bedrock-mantle/responses_tool_calls_cache_write.sse", func() Dialect { return openAIResponses{} }},
		{"Anthropic", "recorded/anthropic/tool_runner_next_streaming.sse", func() Dialect { return newAnthropicMessages() }},
		{"Gemini, CRLF", "recorded/google/thought_summary.sse", func() Dialect { return newGemini() }},
		{"Vertex AI, CRLF", "recorded/vertexai/basic_reply_long.sse", func() Dialect { return newGemini() }},
		{"Cohere", "recorded/cohere/chat_tool_calls.sse", func() Dialect { return cohereChat{} }},
		{"TGI, hand-written", "tgi/generate_stream.sse", func() Dialect { return tgi{} }},
	}
	measure := func(d Dialect, pieces [][]byte) *Measurement {
		mt := exchange{200, "text/event-stream", ""}.start(d, Options{}, nil)
		return replayPieces(mt, pieces)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := testdata(t, ".", tt.file)
			done := []byte("data: [DONE]\n\n")
			if bytes.Contains(body, []byte("\r\n")) {
				done = []byte("data: [DONE]\r\n\r\n")
			}
			var pieces [][]byte
			from := 0
			for _, end := eventEnd(body, 0); end >= 0; _, end = eventEnd(body, end) {
				pieces = append(pieces, body[from:end])
				from = end
			}
			if len(pieces) < 4 {
				t.Fatalf("%d events", len(pieces))
			}
			for _, cut := range []int{len(pieces), len(pieces) / 2} {
				plain := measure(tt.dialect(), pieces[:cut])
				with := measure(tt.dialect(), append(pieces[:cut:cut], done))
				if with.Degraded != 0 || with.Chunks != plain.Chunks+1 {
					t.Errorf("%d events and [DONE]: degraded %d %q, chunks %d; want 0 and %d", cut, with.Degraded, with.DegradedReason, with.Chunks, plain.Chunks+1)
				}
				if with.Outcome != plain.Outcome || with.ErrorType != plain.ErrorType || with.Usage != plain.Usage ||
					with.FirstToken != plain.FirstToken || with.LastToken != plain.LastToken || with.OutputEvents != plain.OutputEvents ||
					with.EstimatedOutputTokens != plain.EstimatedOutputTokens || len(with.FinishReasons) != len(plain.FinishReasons) {
					t.Errorf("%d events and [DONE] measure differently:\n got %+v\nwant %+v", cut, with, plain)
				}
			}
			if m := measure(tt.dialect(), pieces); m.Outcome != OutcomeCompleted {
				t.Errorf("the whole recording: outcome %v", m.Outcome)
			}
			if m := measure(tt.dialect(), append(pieces[:len(pieces)/2:len(pieces)/2], done)); m.Outcome != OutcomeTruncated {
				t.Errorf("half the recording and [DONE]: outcome %v, want truncated", m.Outcome)
			}
		})
	}
}

// TestRecordedFinishAndEndFields reads, on real recordings, finish and end
// fields the other recorded tests do not cover, written by hand from the
// payloads: Gemini's UNEXPECTED_TOOL_CALL (a finish reason, with a
// finishMessage that is not read), and the last line of a real Ollama
// /api/chat stream, with done_reason, its counts and its four durations.
func TestRecordedFinishAndEndFields(t *testing.T) {
	t.Run("Vertex AI gemini-3-flash-preview: UNEXPECTED_TOOL_CALL", func(t *testing.T) {
		// A call of an undeclared function list_files, with empty args:
		// 22 prompt tokens; 3 candidates + 142 thoughts = 145 output
		// (22 + 145 = 167, the totalTokenCount).
		mt := exchange{200, "application/json", "/v1beta1/projects/p/locations/global/publishers/google/models/gemini-3-flash-preview:generateContent"}.start(newGemini(), Options{}, []byte(`{}`))
		checkBody(t, readInPieces(mt, testdata(t, "recorded", "vertexai/unexpected_tool_call_body.json"), 100), dialectCase{
			usage: Usage{22, 145, -1, -1, 142, UsageReported},
			model: "gemini-3-flash-preview", id: "Yu6TaYC3BcuQq7UPp8rOsAY",
			finish: []string{"UNEXPECTED_TOOL_CALL"}, outcome: OutcomeCompleted,
		})
	})
	t.Run("Ollama /api/chat: done_reason length, counts and durations on the done line", func(t *testing.T) {
		// 128 content lines, then done: true with done_reason length,
		// prompt_eval_count 10, eval_count 128 and the durations in
		// nanoseconds.
		mt := exchange{200, "application/x-ndjson", "/api/chat"}.start(ollama{}, Options{}, []byte(`{"model":"tiny-words"}`))
		m := replayPieces(mt, ollamaLines(testdata(t, "recorded", "ollama/chat_words.ndjson")))
		checkStream(t, m, dialectCase{
			firstToken: 0, firstVisible: 0, lastToken: 127, chunks: 129,
			usage: Usage{10, 128, -1, -1, -1, UsageReported},
			model: "tiny-words", finish: []string{"length"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"total", 1.010134304}, {"load", 0.003153368}, {"prompt_eval", 0.0406887}, {"eval", 0.957226524}},
		})
	})
}
