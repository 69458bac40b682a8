package meter

import (
	"testing"
	"time"
)

// BenchmarkOpenAIChatEvent is the per-event cost on the hot path: one SSE
// event decoded and read by the OpenAI chat dialect, fed one event per Write
// as reverse_proxy delivers them.
func BenchmarkOpenAIChatEvent(b *testing.B) {
	evs := events(readFixture(b, "chat_usage.sse"))
	mt := New(openAIChat{}, Options{}, t0)
	mt.Response(200, "text/event-stream", "")
	mt.Write(evs[0], t0.Add(step))
	content := evs[2]
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	now := t0.Add(step)
	for b.Loop() {
		now = now.Add(time.Microsecond)
		mt.Write(content, now)
	}
}

// BenchmarkOpenAIChatStream is one whole exchange: a Meter set up, a
// 13-event stream with usage fed in 32 KiB writes, and the Finish.
func BenchmarkOpenAIChatStream(b *testing.B) {
	body := readFixture(b, "chat_usage.sse")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var mt Meter
	for b.Loop() {
		mt.Init(openAIChat{}, Options{}, t0)
		mt.Response(200, "text/event-stream", "")
		mt.Write(body, t0.Add(step))
		mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
	}
}

// BenchmarkEstimateTokens is the estimator on a typical one-token delta.
func BenchmarkEstimateTokens(b *testing.B) {
	s := []byte(` outstanding`)
	b.ReportAllocs()
	for b.Loop() {
		EstimateTokens(s)
	}
}
