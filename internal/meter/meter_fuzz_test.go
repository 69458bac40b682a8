package meter

import "testing"

// FuzzOpenAIChat feeds arbitrary bytes to the OpenAI chat dialect as an event stream and as a
// body: whatever the input, reading it must not panic, cutting the
// stream at any point must not change what is measured, and neither must
// skipping the chunks' repeated heads (checkHeadSkipExact).
func FuzzOpenAIChat(f *testing.F) {
	fuzzSeeds(f, "openai")
	// A real stream with SSE comments, cache_write_tokens and OpenRouter's
	// cost members.
	f.Add(testdata(f, "recorded", "openrouter/chat_stream_cost.sse"), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		fuzzDialect(t, func() Dialect { return openAIChat{} }, "/v1/chat/completions", "text/event-stream", data, cut)
		checkHeadSkipExact(t, data)
	})
}
