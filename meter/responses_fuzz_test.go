package meter

import "testing"

// FuzzOpenAIResponses feeds arbitrary bytes to the Responses dialect as an
// event stream and as a body: no panic, and no change when the stream is cut
// at any point.
func FuzzOpenAIResponses(f *testing.F) {
	anthropicFuzzSeeds(f, "responses")
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		anthropicFuzzRun(t, func() Dialect { return openAIResponses{} }, "/v1/responses", data, cut)
	})
}
