package meter

import "testing"

// BenchmarkTGIEvent is the per-event cost on the hot path: one SSE event
// framed and read by the TGI dialect, fed one SSE event per Write as
// reverse_proxy delivers them.
func BenchmarkTGIEvent(b *testing.B) {
	mt := exchange{200, "text/event-stream", ""}.start(tgi{}, Options{}, nil)
	benchEvent(b, mt, events(testdata(b, "tgi", "generate_stream.sse")), 1, 3)
}
