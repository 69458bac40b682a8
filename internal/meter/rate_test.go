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
		// thoughts are reasoning_content deltas streamed before them.
		thoughts []string
		// completion is the usage the stream reports, 0 for none, and
		// reasoning the reasoning_tokens counted inside it.
		completion, reasoning int64
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
			name: "reasoning counted but never streamed (OpenAI's reasoning models): generated before the first event, not in the window",
			// 50 of the 57 were reasoned unseen during time to first
			// token; the 7 deltas are the decode window's.
			deltas: []string{"Hello", " there", ",", " how", " are", " you", "?"}, completion: 57, reasoning: 50,
			firstTokens: 1, rate: 6 / 0.6,
		},
		{
			name: "reasoning streamed (DeepSeek's reasoning_content): every token in the window",
			// The three thoughts and the four answer words are the seven
			// reported, three of them reasoning.
			thoughts: []string{"Let", " me", " see"},
			deltas:   []string{"It", " is", " ten", "."}, completion: 7, reasoning: 3,
			firstTokens: 1, rate: 6 / 0.6,
		},
		{
			name: "all of it hidden reasoning but one token: no rate",
			// xAI's grok-4 shape: completion 1, reasoning 290 (added to
			// the output whatever the arithmetic).
			deltas: []string{"Hi"}, completion: 291, reasoning: 290,
			firstTokens: 1,
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
			for _, d := range tt.thoughts {
				fmt.Fprintf(&b, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"reasoning_content":%q}}]}`+"\n\n", d)
			}
			for _, d := range tt.deltas {
				fmt.Fprintf(&b, `data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":%q}}]}`+"\n\n", d)
			}
			b.WriteString(`data: {"id":"c","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
			if tt.completion > 0 {
				fmt.Fprintf(&b, `data: {"id":"c","model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":%d,"total_tokens":%d,"completion_tokens_details":{"reasoning_tokens":%d}}}`+"\n\n", tt.completion, tt.completion+3, tt.reasoning)
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
			if tt.rate == 0 {
				if ok {
					t.Errorf("OutputTokensPerSecond = %v, want none", rate)
				}
				if tpot, ok := m.TimePerOutputToken(); ok {
					t.Errorf("TimePerOutputToken = %v, want none", tpot)
				}
				return
			}
			if !ok || math.Abs(rate-tt.rate) > 1e-9 {
				t.Errorf("OutputTokensPerSecond = %v %v, want %v", rate, ok, tt.rate)
			}
			if tpot, ok := m.TimePerOutputToken(); !ok || math.Abs(tpot.Seconds()-1/tt.rate) > 1e-9 {
				t.Errorf("TimePerOutputToken = %v %v, want %v s", tpot, ok, 1/tt.rate)
			}
		})
	}
}

// TestOutputTokensPerSecondRecorded: the decode rate of real recordings
// replayed one event per step (check_test.go), worked out by hand from
// their payloads.
func TestOutputTokensPerSecondRecorded(t *testing.T) {
	tests := []struct {
		name, fixture string
		newDialect    func() Dialect
		path          string
		rate          float64
	}{
		{
			name: "Azure gpt-5-nano: 64 reasoning tokens never streamed are not decoded in the window", fixture: "azure/chat_model_router.sse",
			newDialect: func() Dialect { return openAIChat{} }, path: "/v1/chat/completions",
			// 78 - 64 = 14 streamed in events 2 to 5 ("Capital", " of",
			// " Denmark", ".", one token each by the estimate): the first
			// event's share is 1 * 14 / 4 = 3.5, rounded to 4, so 10
			// tokens over 3 steps. Counting the hidden reasoning in the
			// window gave 58 over 3 steps.
			rate: 10 / (3 * step).Seconds(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{200, "text/event-stream", tt.path}.start(tt.newDialect(), Options{}, []byte(`{"model":"m","stream":true}`))
			m := replayPieces(mt, events(testdata(t, "recorded", tt.fixture)))
			if rate, ok := m.OutputTokensPerSecond(); !ok || math.Abs(rate-tt.rate) > 1e-6 {
				t.Errorf("OutputTokensPerSecond = %v %v, want %v (streamed %d, first event %d)", rate, ok, tt.rate, m.StreamedOutputTokens(), m.FirstEventTokens())
			}
		})
	}
}
