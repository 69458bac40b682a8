package meter

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tiktoken-go/tokenizer"

	"github.com/tokentap/tokentap/internal/meter/tokencount"
)

// accuracyCorpus is text of the kinds models generate: prose, a list, code
// and numbers. The estimate is judged on it against a real tokenizer.
const accuracyCorpus = `Large language models generate text one token at a time, and the speed at which they do so
depends on the model, the hardware serving it, and how busy that hardware is. A team that wants to
choose between two providers should therefore measure throughput under its own load: the median tells
you what most users see, while the 95th percentile tells you what the unlucky ones see.

Here is a short checklist:
1. Measure time to first token (TTFT) separately from decode speed.
2. Compare output tokens per second at p50 and p95, not averages.
3. Watch for stalls longer than one second; they usually mean queueing upstream.

func rate(tokens int, d time.Duration) float64 {
	if tokens < 2 || d <= 0 {
		return 0
	}
	return float64(tokens-1) / d.Seconds()
}

In our last test, gpt-4o-mini streamed 1,024 tokens in 11.3 seconds (about 90.6 tokens/s), while the
self-hosted Llama 3.1 8B on a single GPU reached 142 tokens/s but took 2.7 s longer to start.
Température, naïve café, 東京 and emoji 🙂 appear in real outputs too.`

// TestEstimateAccuracy measures how far the streamed-text estimate is from
// the o200k tokenizer (GPT-4o's) when deltas are one token each, as OpenAI
// and most OpenAI-compatible servers stream, and when deltas carry several
// tokens, as Azure's buffered filter and some servers do. The figures are
// quoted in docs/telemetry.md.
func TestEstimateAccuracy(t *testing.T) {
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	ids, tokens, err := enc.Encode(accuracyCorpus)
	if err != nil {
		t.Fatal(err)
	}
	_ = tokens
	// Decode token by token, so each delta is exactly one real token.
	var pieces []string
	for _, id := range ids {
		s, err := enc.Decode([]uint{id})
		if err != nil {
			t.Fatal(err)
		}
		pieces = append(pieces, s)
	}
	counter, err := tokencount.New("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name      string
		perDelta  int
		estimator Estimator
		maxErr    float64
	}{
		// The heuristic: docs/telemetry.md publishes +6.8 %, +3.0 % and
		// +1.1 %; each bound is twice that figure.
		{"one token per delta", 1, nil, 0.136},
		{"four tokens per delta", 4, nil, 0.060},
		{"sixteen tokens per delta", 16, nil, 0.022},
		// The tokenizer itself, fed delta by delta: exact when deltas are
		// tokens, and off only where a merge would cross a delta
		// boundary, which this text never makes it do (0.0 % published).
		{"one token per delta, o200k", 1, counter, 0},
		{"four tokens per delta, o200k", 4, counter, 0},
		{"sixteen tokens per delta, o200k", 16, counter, 0},
	} {
		var b strings.Builder
		for i := 0; i < len(pieces); i += tt.perDelta {
			delta := strings.Join(pieces[i:min(i+tt.perDelta, len(pieces))], "")
			js, _ := json.Marshal(delta)
			fmt.Fprintf(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%s}}]}\n\n", js)
		}
		b.WriteString("data: [DONE]\n\n")
		mt := New(openAIChat{}, Options{Estimator: tt.estimator}, t0)
		mt.Request("/v1/chat/completions", []byte(`{"stream":true}`), false)
		mt.Response(200, "text/event-stream", "")
		mt.Write([]byte(b.String()), t0.Add(step))
		m := mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
		rel := float64(m.Usage.OutputTokens-int64(len(ids))) / float64(len(ids))
		t.Logf("%-32s tokenizer %4d  estimate %4d  error %+6.1f%%", tt.name, len(ids), m.Usage.OutputTokens, 100*rel)
		if math.Abs(rel) > tt.maxErr {
			t.Errorf("%s: estimate off by %.1f%%, more than %.1f%% (twice the figure docs/telemetry.md publishes)", tt.name, 100*rel, 100*tt.maxErr)
		}
	}

	// The fixtures whose usage is reported: the estimate against the
	// reported count and against the tokenizer's count of the same text.
	// Those in docs/telemetry.md's table must give its figures exactly.
	published := map[string][3]int64{ // reported, o200k tokenizer, heuristic
		"chat_usage.sse":                 {9, 9, 9},
		"chat_n2.sse":                    {6, 5, 6},
		"chat_refusal.sse":               {10, 9, 13},
		"deepseek_reasoning.sse":         {14, 16, 14},
		"llamacpp_done_unterminated.sse": {4, 3, 4},
		"chat_tool_calls.sse":            {30, 14, 24},
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "openai", "*.sse"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		mt := New(openAIChat{}, Options{}, t0)
		mt.Response(200, "text/event-stream", "")
		mt.Write(b, t0.Add(step))
		m := mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
		if m.Usage.Source != UsageReported || m.EstimatedOutputTokens == 0 {
			continue
		}
		text := streamedText(b)
		ids, _, _ := enc.Encode(text)
		name := filepath.Base(f)
		t.Logf("%-34s reported %4d  tokenizer %4d  estimate %4d", name, m.Usage.OutputTokens, len(ids), m.EstimatedOutputTokens)
		if want, ok := published[name]; ok {
			if got := [3]int64{m.Usage.OutputTokens, int64(len(ids)), m.EstimatedOutputTokens}; got != want {
				t.Errorf("%s: reported, tokenizer, heuristic %v; docs/telemetry.md says %v", name, got, want)
			}
			delete(published, name)
		}
	}
	for name := range published {
		t.Errorf("%s, in docs/telemetry.md's table, is not a fixture with reported usage", name)
	}
}

// streamedText joins every generated fragment of a chat stream.
func streamedText(b []byte) string {
	var sb strings.Builder
	for _, ev := range events(b) {
		data := strings.TrimPrefix(strings.TrimSpace(string(ev)), "data: ")
		gjson.Get(data, "choices").ForEach(func(_, c gjson.Result) bool {
			d := c.Get("delta")
			for _, k := range []string{"content", "refusal", "reasoning_content"} {
				sb.WriteString(d.Get(k).String())
			}
			d.Get("tool_calls").ForEach(func(_, call gjson.Result) bool {
				// A call's name is generated output too.
				sb.WriteString(call.Get("function.name").String())
				sb.WriteString(call.Get("function.arguments").String())
				return true
			})
			return true
		})
	}
	return sb.String()
}
