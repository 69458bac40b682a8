package meter

import "testing"

// benchGeminiEvent is the per-event cost of one framing: the fixture's
// second event fed again and again, one event per Write, as reverse_proxy
// delivers them.
func benchGeminiEvent(b *testing.B, fixture string) {
	mt := geminiExchangeFor(fixture).start(newGemini(), Options{}, nil)
	benchEvent(b, mt, geminiPieces(fixture, testdata(b, "gemini", fixture)), 1, 1)
}

// BenchmarkGeminiSSEEvent is one CRLF-framed alt=sse event.
func BenchmarkGeminiSSEEvent(b *testing.B) { benchGeminiEvent(b, "sse_text.sse") }

// BenchmarkGeminiArrayEvent is one pretty-printed element of the default
// streamed JSON array.
func BenchmarkGeminiArrayEvent(b *testing.B) { benchGeminiEvent(b, "array_text.json") }

// BenchmarkGeminiStream is one whole exchange: a Meter set up, the thinking
// stream fed in one write, and the Finish.
func BenchmarkGeminiStream(b *testing.B) {
	benchStream(b, func() Dialect { return newGemini() }, exchange{200, "text/event-stream", geminiStreamPath}, testdata(b, "gemini", "sse_thinking.sse"))
}
