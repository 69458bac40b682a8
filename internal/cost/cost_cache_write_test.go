package cost

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/meter"
)

// TestCostOfRecordedCacheWrites prices OpenRouter's recorded Chat
// Completions bodies of Claude Sonnet 4.6 (internal/meter/testdata/recorded/
// openrouter, SOURCES-openai-family.md) at Anthropic's prices, dollars per
// million: input 3, output 15, cache read 0.30, cache write 3.75. The cost
// must be what OpenRouter itself reported in usage.cost, read by hand from
// each payload, which holds only if prompt_tokens includes the tokens
// read from and written to the cache and the written ones are priced at
// the cache write price:
//   - 3,214 prompt tokens, 3,211 written; 100 output: 3 × 3 + 3,211 ×
//     3.75 + 100 × 15 = 13,550.25, $0.01355025;
//   - 3,329 prompt tokens, 3,211 read and 115 written; 53 output: 3 × 3 +
//     3,211 × 0.30 + 115 × 3.75 + 53 × 15 = 2,198.55, $0.00219855.
func TestCostOfRecordedCacheWrites(t *testing.T) {
	tests := []struct {
		file string
		want float64 // usage.cost
	}{
		{"chat_cache_write_body.json", 0.01355025},
		{"chat_cache_read_write_body.json", 0.00219855},
	}
	p := Price{Input: 3, Output: 15, CacheRead: ptr(0.30), CacheWrite: ptr(3.75)}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("..", "meter", "testdata", "recorded", "openrouter", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			info, _ := meter.LookupDialect("openai_chat")
			var mt meter.Meter
			start := time.Now()
			mt.Init(info.New(), meter.Options{}, start)
			mt.Request("/api/v1/chat/completions", []byte(`{"model":"anthropic/claude-sonnet-4.6"}`), false)
			mt.Response(200, "application/json", "")
			mt.Write(body, start.Add(time.Second))
			m := mt.Finish(start.Add(2*time.Second), meter.OutcomeUnknown, "")
			got, ok := p.CostOf(m)
			if !ok || math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("cost %v (usage %+v), want OpenRouter's %v", got, m.Usage, tt.want)
			}
		})
	}
}
