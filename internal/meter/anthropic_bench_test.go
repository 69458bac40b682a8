package meter

import "testing"

// BenchmarkAnthropicEvent is the per-event cost on the hot path: one
// padded text_delta event decoded and read, one event per Write.
func BenchmarkAnthropicEvent(b *testing.B) {
	mt := exchange{200, "text/event-stream; charset=utf-8", ""}.start(newAnthropicMessages(), Options{}, nil)
	benchEvent(b, mt, events(testdata(b, "anthropic", "thinking_text.sse")), 9, 10)
}

// BenchmarkAnthropicStream is one whole exchange: a Meter set up, the
// 14-event thinking stream fed in one write, and the Finish.
func BenchmarkAnthropicStream(b *testing.B) {
	benchStream(b, func() Dialect { return newAnthropicMessages() }, exchange{200, "text/event-stream", ""}, testdata(b, "anthropic", "thinking_text.sse"))
}
