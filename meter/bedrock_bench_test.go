package meter

import (
	"testing"
	"time"
)

// benchBedrock is the per-event cost on the hot path: one event stream
// message decoded and read by a Bedrock dialect, one message per Write as
// reverse_proxy delivers them.
func benchBedrock(b *testing.B, path, fixture string, warm, event int) {
	frames := bedrockFrames(readBedrockFixture(b, fixture))
	mt := bedrockMeter(b, path, Options{})
	for _, f := range frames[:warm] {
		mt.Write(f, t0.Add(step))
	}
	ev := frames[event]
	b.SetBytes(int64(len(ev)))
	b.ReportAllocs()
	now := t0.Add(step)
	for b.Loop() {
		now = now.Add(time.Microsecond)
		mt.Write(ev, now)
	}
}

// BenchmarkBedrockConverseEvent: a ConverseStream text delta.
func BenchmarkBedrockConverseEvent(b *testing.B) {
	benchBedrock(b, bedrockConversePath, "converse_text.bin", 3, 3)
}

// BenchmarkBedrockInvokeEvent: an InvokeModelWithResponseStream chunk holding
// an Anthropic text delta, base64 decoding included.
func BenchmarkBedrockInvokeEvent(b *testing.B) {
	benchBedrock(b, bedrockInvokePath, "invoke_anthropic.bin", 3, 3)
}

// BenchmarkBedrockConverseStream is one whole exchange: a Meter set up, the
// seven-message stream fed in one write, and the Finish.
func BenchmarkBedrockConverseStream(b *testing.B) {
	body := readBedrockFixture(b, "converse_text.bin")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var mt Meter
	for b.Loop() {
		mt.Init(newBedrock(false), Options{}, t0)
		mt.Response(200, bedrockMediaType, "")
		mt.Write(body, t0.Add(step))
		mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
	}
}
