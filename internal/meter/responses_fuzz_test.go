package meter

import "testing"

// FuzzOpenAIResponses feeds arbitrary bytes to the Responses dialect as an
// event stream and as a body: no panic, and no change when the stream is cut
// at any point.
func FuzzOpenAIResponses(f *testing.F) {
	fuzzSeeds(f, "responses")
	// Real streams of shapes the fixtures lack: a gateway's [DONE] after
	// response.completed, data: lines before event: lines, cache writes.
	for _, name := range []string{"openrouter/responses_reasoning_text_done.sse", "bedrock-mantle/responses_tool_calls_cache_write.sse"} {
		f.Add(testdata(f, "recorded", name), uint16(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		fuzzDialect(t, func() Dialect { return openAIResponses{} }, "/v1/responses", "text/event-stream", data, cut)
	})
}
