package meter

import "testing"

// FuzzOpenAIResponses feeds arbitrary bytes to the Responses dialect as an
// event stream and as a body: no panic, and no change when the stream is cut
// at any point.
func FuzzOpenAIResponses(f *testing.F) {
	fuzzSeeds(f, "responses")
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		fuzzDialect(t, func() Dialect { return openAIResponses{} }, "/v1/responses", "text/event-stream", data, cut)
	})
}
