package cost

import (
	"math"
	"testing"

	"github.com/tokentap/tokentap/internal/meter"
)

// FuzzLoadLiteLLM feeds the pricing file reader arbitrary bytes: it never
// panics, and whatever it loads without an error prices any usage at a
// finite cost of 0 or more.
func FuzzLoadLiteLLM(f *testing.F) {
	for _, s := range []string{
		`{"claude-sonnet-4-5":{"input_cost_per_token":3e-06,"output_cost_per_token":1.5e-05,"cache_read_input_token_cost":3e-07,"cache_creation_input_token_cost":3.75e-06}}`,
		`{"openai/gpt-4.1-nano":{"input_cost_per_token":1e-07,"output_cost_per_token":4e-07},"azure/gpt-4.1-nano":{"input_cost_per_token":1.1e-07,"output_cost_per_token":4.4e-07}}`,
		`{"o3":{"input_cost_per_token":2e-06,"output_cost_per_token":8e-06,"output_cost_per_reasoning_token":8e-06}}`,
		`{"dall-e-3":{"output_cost_per_image":0.04}}`,
		`{"m":{"input_cost_per_token":1e308,"output_cost_per_token":1e308}}`,
		`{"m":{"input_cost_per_token":1e300,"output_cost_per_token":1}}`,
		`[]`, `{`, `{"m":null}`,
	} {
		f.Add([]byte(s), "claude-sonnet-4-5")
	}
	f.Fuzz(func(t *testing.T, data []byte, model string) {
		var tb Table
		if _, _, err := tb.LoadLiteLLM(data); err != nil {
			return
		}
		p, ok := tb.Lookup(model)
		if !ok {
			return
		}
		usd, ok := p.Cost(meter.Usage{InputTokens: 1000, OutputTokens: 1000, CacheReadInputTokens: 100, CacheCreationInputTokens: 100, ReasoningOutputTokens: 10})
		if !ok || !(usd >= 0) || math.IsInf(usd, 0) {
			t.Fatalf("price %+v gives cost %v, %v", p, usd, ok)
		}
	})
}
