package meter

import (
	"testing"
	"time"
)

// benchEvent is the per-event cost on the hot path, the figure every
// dialect's Benchmark*Event reports: mt warmed with pieces[:warm] (the first
// sight of an id or a model is copied), then pieces[event] fed again and
// again, one event per Write as reverse_proxy delivers them.
func benchEvent(b *testing.B, mt *Meter, pieces [][]byte, warm, event int) {
	for _, p := range pieces[:warm] {
		mt.Write(p, t0.Add(step))
	}
	ev := pieces[event]
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	now := t0.Add(step)
	for b.Loop() {
		now = now.Add(time.Microsecond)
		mt.Write(ev, now)
	}
}

// benchStream is one whole exchange, the figure every dialect's
// Benchmark*Stream reports: a Meter set up for x on a new dialect, body fed
// in one write, and the Finish. The Meter is reused, as the handler reuses
// it inside its per-request struct.
func benchStream(b *testing.B, newDialect func() Dialect, x exchange, body []byte) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var mt Meter
	for b.Loop() {
		x.init(&mt, newDialect(), Options{}, nil)
		mt.Write(body, t0.Add(step))
		mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
	}
}
