package meter

import (
	"testing"
	"time"
)

// BenchmarkOpenAIResponsesEvent is the per-event cost on the hot path: one
// output_text.delta event decoded and read, one event per Write.
func BenchmarkOpenAIResponsesEvent(b *testing.B) {
	evs := events(responsesFixture(b, "text.sse"))
	mt := New(openAIResponses{}, Options{}, t0)
	mt.Response(200, "text/event-stream; charset=utf-8", "")
	for _, ev := range evs[:5] {
		mt.Write(ev, t0.Add(step))
	}
	content := evs[5]
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	now := t0.Add(step)
	for b.Loop() {
		now = now.Add(time.Microsecond)
		mt.Write(content, now)
	}
}

// BenchmarkOpenAIResponsesStream is one whole exchange: a Meter set up, the
// 19-event text stream (large created, in_progress and completed events
// included) fed in one write, and the Finish.
func BenchmarkOpenAIResponsesStream(b *testing.B) {
	body := responsesFixture(b, "text.sse")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var mt Meter
	for b.Loop() {
		mt.Init(openAIResponses{}, Options{}, t0)
		mt.Response(200, "text/event-stream", "")
		mt.Write(body, t0.Add(step))
		mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
	}
}
