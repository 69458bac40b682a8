package meter

import (
	"testing"
	"time"
)

// BenchmarkAnthropicEvent is the per-event cost on the hot path: one
// padded text_delta event decoded and read, one event per Write.
func BenchmarkAnthropicEvent(b *testing.B) {
	evs := events(anthropicFixture(b, "thinking_text.sse"))
	mt := New(newAnthropicMessages(), Options{}, t0)
	mt.Response(200, "text/event-stream; charset=utf-8", "")
	for _, ev := range evs[:9] {
		mt.Write(ev, t0.Add(step))
	}
	content := evs[10]
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	now := t0.Add(step)
	for b.Loop() {
		now = now.Add(time.Microsecond)
		mt.Write(content, now)
	}
}

// BenchmarkAnthropicStream is one whole exchange: a Meter set up, the
// 14-event thinking stream fed in one write, and the Finish.
func BenchmarkAnthropicStream(b *testing.B) {
	body := anthropicFixture(b, "thinking_text.sse")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var mt Meter
	for b.Loop() {
		mt.Init(newAnthropicMessages(), Options{}, t0)
		mt.Response(200, "text/event-stream", "")
		mt.Write(body, t0.Add(step))
		mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
	}
}
