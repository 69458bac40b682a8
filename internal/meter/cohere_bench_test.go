package meter

import "testing"

// BenchmarkCohereEvent is the per-event cost on the hot path: one SSE event
// framed and read by the Cohere v2 chat dialect, fed one SSE event per Write as
// reverse_proxy delivers them.
func BenchmarkCohereEvent(b *testing.B) {
	mt := exchange{200, "text/event-stream", ""}.start(cohereChat{}, Options{}, nil)
	benchEvent(b, mt, events(testdata(b, "cohere", "text.sse")), 1, 4)
}
