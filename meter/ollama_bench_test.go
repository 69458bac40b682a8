package meter

import (
	"testing"
	"time"
)

// BenchmarkOllamaEvent is the per-event cost on the hot path: one NDJSON line
// framed and read by the Ollama native dialect, fed one NDJSON line per Write as
// reverse_proxy delivers them.
func BenchmarkOllamaEvent(b *testing.B) {
	evs := ollamaLines(ollamaFixture(b, "chat.ndjson"))
	mt := New(ollama{}, Options{}, t0)
	mt.Response(200, "application/x-ndjson", "")
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
