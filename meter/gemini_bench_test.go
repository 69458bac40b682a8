package meter

import (
	"testing"
	"time"
)

// benchGeminiEvent is the per-event cost of one framing: the fixture's
// second event fed again and again, one event per Write, as reverse_proxy
// delivers them.
func benchGeminiEvent(b *testing.B, fixture string) {
	pieces := geminiPieces(fixture, geminiFixture(b, fixture))
	x := geminiExchangeFor(fixture)
	mt := New(newGemini(), Options{}, t0)
	mt.Request(x.path, nil, false)
	mt.Response(x.status, x.contentType, "")
	mt.Write(pieces[0], t0.Add(step))
	content := pieces[1]
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	now := t0.Add(step)
	for b.Loop() {
		now = now.Add(time.Microsecond)
		mt.Write(content, now)
	}
}

// BenchmarkGeminiSSEEvent is one CRLF-framed alt=sse event.
func BenchmarkGeminiSSEEvent(b *testing.B) { benchGeminiEvent(b, "sse_text.sse") }

// BenchmarkGeminiArrayEvent is one pretty-printed element of the default
// streamed JSON array.
func BenchmarkGeminiArrayEvent(b *testing.B) { benchGeminiEvent(b, "array_text.json") }

// BenchmarkGeminiStream is one whole exchange: a Meter set up, the thinking
// stream fed in one write, and the Finish.
func BenchmarkGeminiStream(b *testing.B) {
	body := geminiFixture(b, "sse_thinking.sse")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var mt Meter
	for b.Loop() {
		mt.Init(newGemini(), Options{}, t0)
		mt.Request(geminiStreamPath, nil, false)
		mt.Response(200, "text/event-stream", "")
		mt.Write(body, t0.Add(step))
		mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
	}
}
