package meter

import (
	"testing"
	"time"
)

// BenchmarkTGIEvent is the per-event cost on the hot path: one SSE event
// framed and read by the TGI dialect, fed one SSE event per Write as
// reverse_proxy delivers them.
func BenchmarkTGIEvent(b *testing.B) {
	evs := events(tgiFixture(b, "generate_stream.sse"))
	mt := New(tgi{}, Options{}, t0)
	mt.Response(200, "text/event-stream", "")
	mt.Write(evs[0], t0.Add(step))
	ev := evs[3]
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	now := t0.Add(step)
	for b.Loop() {
		now = now.Add(time.Microsecond)
		mt.Write(ev, now)
	}
}
