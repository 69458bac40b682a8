package meter

import (
	"testing"
	"time"
)

// BenchmarkCohereEvent is the per-event cost on the hot path: one SSE event
// framed and read by the Cohere v2 chat dialect, fed one SSE event per Write as
// reverse_proxy delivers them.
func BenchmarkCohereEvent(b *testing.B) {
	evs := events(cohereFixture(b, "text.sse"))
	mt := New(cohereChat{}, Options{}, t0)
	mt.Response(200, "text/event-stream", "")
	mt.Write(evs[0], t0.Add(step))
	ev := evs[4]
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	now := t0.Add(step)
	for b.Loop() {
		now = now.Add(time.Microsecond)
		mt.Write(ev, now)
	}
}
