package meter

import "testing"

// BenchmarkOpenAIChatEvent is the per-event cost on the hot path: one SSE
// event decoded and read by the OpenAI chat dialect, fed one event per Write
// as reverse_proxy delivers them.
func BenchmarkOpenAIChatEvent(b *testing.B) {
	mt := exchange{200, "text/event-stream", ""}.start(openAIChat{}, Options{}, nil)
	benchEvent(b, mt, events(testdata(b, "openai", "chat_usage.sse")), 1, 2)
}

// BenchmarkOpenAIChatStream is one whole exchange: a Meter set up, a
// 13-event stream with usage fed in 32 KiB writes, and the Finish.
func BenchmarkOpenAIChatStream(b *testing.B) {
	benchStream(b, func() Dialect { return openAIChat{} }, exchange{200, "text/event-stream", ""}, testdata(b, "openai", "chat_usage.sse"))
}

// BenchmarkEstimateTokens is the estimator on a typical one-token delta.
func BenchmarkEstimateTokens(b *testing.B) {
	s := []byte(` outstanding`)
	b.ReportAllocs()
	for b.Loop() {
		EstimateTokens(s)
	}
}
