package meter

import "testing"

// FuzzOpenAIChat feeds arbitrary bytes to the OpenAI chat dialect as an event stream and as a
// body: whatever the input, reading it must not panic, and cutting the
// stream at any point must not change what is measured.
func FuzzOpenAIChat(f *testing.F) {
	fuzzSeeds(f, "openai")
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		fuzzDialect(t, func() Dialect { return openAIChat{} }, "/v1/chat/completions", "text/event-stream", data, cut)
	})
}
