package meter

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// TestOutputTokensPerSecondFirstEvent: the decode rate counts only the
// tokens that arrived after the first output event, however many that
// event carried. Each stream has its output events 100 ms apart, so the
// rate is what came after the first event over their span.
func TestOutputTokensPerSecondFirstEvent(t *testing.T) {
	tests := []struct {
		name string
		// deltas are the content of the output events, in order.
		deltas []string
		// completion is the usage the stream reports, 0 for none.
		completion int64
		// firstTokens is how many output tokens the first event holds,
		// and rate the decode rate that follows.
		firstTokens int64
		rate        float64
	}{
		{
			name:   "one token per event: (n - 1) over the span",
			deltas: []string{"Hello", " there", ",", " how", " are", " you", "?"}, completion: 7,
			firstTokens: 1, rate: 6 / 0.6,
		},
		{
			name: "a first event of five tokens, then one per event (a server that batches its first write)",
			// "Hello there, how are" is Hello, " there", ",", " how",
			// " are": 5 of the reported 10.
			deltas: []string{"Hello there, how are", " you", " doing", " this", " fine", " day"}, completion: 10,
			firstTokens: 5, rate: 5 / 0.5,
		},
		{
			name: "every event two tokens by the estimate, the usage twice that: the first event's share",
			// Each delta is two tokens by the heuristic; the provider
			// reports 24 for 6 events (a tokenizer that splits finer):
			// the first event's share of the count, 4, arrived with it.
			deltas: []string{" red fox", " blue cat", " green owl", " grey elk", " pink yak", " teal ant"}, completion: 24,
			firstTokens: 4, rate: 20 / 0.5,
		},
		{
			name:   "no usage: the estimate is the count, the first event's estimate its part",
			deltas: []string{"Hello there", " you", " all"}, completion: 0,
			firstTokens: 2, rate: 2 / 0.2,
		},
		{
			name:   "all output in the first event and one empty-ish last: at least one token left to the rest",
			deltas: []string{"Hello there, how are you doing", "!"}, completion: 7,
			firstTokens: 6, rate: 1 / 0.1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			for _, d := range tt.deltas {
				fmt.Fprintf(&b, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":%q}}]}`+"\n\n", d)
			}
			b.WriteString(`data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
			if tt.completion > 0 {
				fmt.Fprintf(&b, `data: {"id":"c","model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n", tt.completion, tt.completion+3)
			}
			b.WriteString("data: [DONE]\n\n")
			mt := New(openAIChat{}, Options{}, t0)
			mt.Request("/v1/chat/completions", []byte(`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`), false)
			mt.Response(200, "text/event-stream", "")
			for i, ev := range events([]byte(b.String())) {
				mt.Write(ev, t0.Add(time.Duration(i+1)*100*time.Millisecond))
			}
			m := mt.Finish(t0.Add(time.Second), OutcomeUnknown, "")
			if got := m.FirstEventTokens(); got != tt.firstTokens {
				t.Errorf("FirstEventTokens = %d, want %d (estimate %d of %d, output %d)", got, tt.firstTokens, m.FirstEventEstimate, m.EstimatedOutputTokens, m.Usage.OutputTokens)
			}
			rate, ok := m.OutputTokensPerSecond()
			if !ok || math.Abs(rate-tt.rate) > 1e-9 {
				t.Errorf("OutputTokensPerSecond = %v %v, want %v", rate, ok, tt.rate)
			}
			if tpot, ok := m.TimePerOutputToken(); !ok || math.Abs(tpot.Seconds()-1/tt.rate) > 1e-9 {
				t.Errorf("TimePerOutputToken = %v %v, want %v s", tpot, ok, 1/tt.rate)
			}
		})
	}
}
