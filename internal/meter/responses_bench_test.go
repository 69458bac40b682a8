package meter

import "testing"

// BenchmarkOpenAIResponsesEvent is the per-event cost on the hot path: one
// output_text.delta event decoded and read, one event per Write.
func BenchmarkOpenAIResponsesEvent(b *testing.B) {
	mt := exchange{200, "text/event-stream; charset=utf-8", ""}.start(openAIResponses{}, Options{}, nil)
	benchEvent(b, mt, events(testdata(b, "responses", "text.sse")), 5, 5)
}

// BenchmarkOpenAIResponsesStream is one whole exchange: a Meter set up, the
// 19-event text stream (large created, in_progress and completed events
// included) fed in one write, and the Finish.
func BenchmarkOpenAIResponsesStream(b *testing.B) {
	benchStream(b, func() Dialect { return openAIResponses{} }, exchange{200, "text/event-stream", ""}, testdata(b, "responses", "text.sse"))
}
