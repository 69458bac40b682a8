package cost

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/meter"
)

func ptr(v float64) *float64 { return &v }

// TestCost: input at its rate less the cached reads and cache writes, each
// at its own rate or the input's; output at its rate, reasoning apart only
// where the model prices it apart; no cost without both counts.
func TestCost(t *testing.T) {
	claude := Price{Input: 3, Output: 15, CacheRead: ptr(0.30), CacheWrite: ptr(3.75)}
	tests := []struct {
		name  string
		price Price
		usage meter.Usage
		want  float64
		ok    bool
	}{
		{"input and output", Price{Input: 0.15, Output: 0.60}, meter.Usage{InputTokens: 1000, OutputTokens: 500, CacheReadInputTokens: -1, CacheCreationInputTokens: -1, ReasoningOutputTokens: -1},
			(1000*0.15 + 500*0.60) / 1e6, true},
		{"cached reads and writes at their rates", claude, meter.Usage{InputTokens: 9632, OutputTokens: 198, CacheReadInputTokens: 6289, CacheCreationInputTokens: 3337},
			(6*3 + 6289*0.30 + 3337*3.75 + 198*15) / 1e6, true},
		{"no cache prices: cached input at the input rate", Price{Input: 2, Output: 8}, meter.Usage{InputTokens: 100, OutputTokens: 10, CacheReadInputTokens: 60},
			(100*2 + 10*8) / 1e6, true},
		{"reasoning priced apart", Price{Input: 1, Output: 4, Reasoning: ptr(10)}, meter.Usage{InputTokens: 10, OutputTokens: 300, ReasoningOutputTokens: 290},
			(10*1 + 10*4 + 290*10) / 1e6, true},
		{"reasoning not priced apart: inside the output", Price{Input: 1, Output: 4}, meter.Usage{InputTokens: 10, OutputTokens: 300, ReasoningOutputTokens: 290},
			(10*1 + 300*4) / 1e6, true},
		{"input unknown: no cost", Price{Input: 1, Output: 4}, meter.Usage{InputTokens: -1, OutputTokens: 300}, 0, false},
		{"output unknown: no cost", Price{Input: 1, Output: 4}, meter.Usage{InputTokens: 10, OutputTokens: -1}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.price.Cost(tt.usage)
			if ok != tt.ok || math.Abs(got-tt.want) > 1e-15 {
				t.Errorf("Cost = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestLookup: the Caddyfile's patterns in their order, then the file's
// exact names, then the file's names without their provider prefix.
func TestLookup(t *testing.T) {
	var tb Table
	if err := tb.Add("gpt-4o-mini*", Price{Input: 0.15, Output: 0.6}); err != nil {
		t.Fatal(err)
	}
	if err := tb.Add("claude-*-4-5", Price{Input: 3, Output: 15}); err != nil {
		t.Fatal(err)
	}
	if err := tb.Add("*", Price{Input: 100, Output: 100}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tb.LoadLiteLLM([]byte(`{"gpt-4o-mini":{"input_cost_per_token":1e-6,"output_cost_per_token":1e-6}}`)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		model string
		input float64
		ok    bool
	}{
		{"gpt-4o-mini-2024-07-18", 0.15, true},
		{"claude-sonnet-4-5", 3, true},
		{"claude-sonnet-4-5-20250929", 100, true}, // the pattern ends at -4-5
		{"gpt-4o-mini", 0.15, true},               // a pattern wins over the file
		{"", 0, false},
	}
	for _, tt := range tests {
		p, ok := tb.Lookup(tt.model)
		if ok != tt.ok || p.Input != tt.input {
			t.Errorf("Lookup(%q) = %v, %v; want input %v, %v", tt.model, p.Input, ok, tt.input, tt.ok)
		}
	}
	if err := tb.Add("", Price{}); err == nil {
		t.Error("an empty pattern was accepted")
	}
	if err := tb.Add("m", Price{Input: -1}); err == nil || !strings.Contains(err.Error(), "input price") {
		t.Errorf("a negative price: %v", err)
	}
}

// TestLoadLiteLLM reads LiteLLM's format: dollars per token, the optional
// cache and reasoning prices, provider-prefixed names also found by the
// model's own name, and entries without token prices skipped.
func TestLoadLiteLLM(t *testing.T) {
	const file = `{
	"sample_spec": {"max_tokens": "LEGACY parameter", "input_cost_per_token": 0.0, "output_cost_per_token": 0.0, "litellm_provider": "one of https://docs.litellm.ai/docs/providers", "mode": "one of chat, embedding"},
	"claude-sonnet-4-5": {"input_cost_per_token": 3e-06, "output_cost_per_token": 1.5e-05, "cache_read_input_token_cost": 3e-07, "cache_creation_input_token_cost": 3.75e-06, "litellm_provider": "anthropic", "mode": "chat"},
	"openai/gpt-4.1-nano": {"input_cost_per_token": 1e-07, "output_cost_per_token": 4e-07, "cache_read_input_token_cost": 2.5e-08},
	"azure/gpt-4.1-nano": {"input_cost_per_token": 1.1e-07, "output_cost_per_token": 4.4e-07},
	"dall-e-3": {"output_cost_per_image": 0.04, "mode": "image_generation"}
}`
	var tb Table
	loaded, skipped, err := tb.LoadLiteLLM([]byte(file))
	if err != nil || loaded != 4 || skipped != 1 {
		t.Fatalf("loaded %d, skipped %d, %v; want 4 (sample_spec's zero prices are prices), 1", loaded, skipped, err)
	}
	tests := []struct {
		model                    string
		input, output, cacheRead float64
	}{
		{"claude-sonnet-4-5", 3, 15, 0.30},
		{"openai/gpt-4.1-nano", 0.10, 0.40, 0.025},
		{"azure/gpt-4.1-nano", 0.11, 0.44, 0.11},
		// The unprefixed name: of azure/ and openai/, the first in name order.
		{"gpt-4.1-nano", 0.11, 0.44, 0.11},
	}
	for _, tt := range tests {
		p, ok := tb.Lookup(tt.model)
		if !ok || !near(p.Input, tt.input) || !near(p.Output, tt.output) || !near(or(p.CacheRead, p.Input), tt.cacheRead) {
			t.Errorf("%s: %+v, %v; want input %v output %v cache read %v", tt.model, p, ok, tt.input, tt.output, tt.cacheRead)
		}
	}
	for _, bad := range []string{`[]`, `{"m":{"input_cost_per_token":"cheap","output_cost_per_token":1}}`, `{"m":{"input_cost_per_token":-1,"output_cost_per_token":1}}`} {
		var tb Table
		if _, _, err := tb.LoadLiteLLM([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestCostOfRecordedStream: a real recorded Anthropic stream (claude-sonnet-5
// with code execution and the prompt cache; meter/testdata/recorded/README.md
// names its source) measured by the meter, priced at $3 input, $15 output,
// $0.30 cached reads and $3.75 cache writes per million tokens, costs what
// the recorded usage gives by hand: its last message_delta says 6 uncached
// input tokens, 6,289 read from the cache, 3,337 written to it and 198
// output tokens, so 6 × 3 + 6,289 × 0.30 + 3,337 × 3.75 + 198 × 15 =
// 17,388.45 dollars per million, $0.01738845.
func TestCostOfRecordedStream(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("..", "meter", "testdata", "recorded", "anthropic", "code_execution_prompt_cache.sse"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := meter.LookupDialect("anthropic_messages")
	var mt meter.Meter
	start := time.Now()
	mt.Init(info.New(), meter.Options{}, start)
	mt.Request("/v1/messages", []byte(`{"model":"claude-sonnet-5","max_tokens":1024,"stream":true}`), false)
	mt.Response(200, "text/event-stream", "")
	mt.Write(body, start.Add(time.Second))
	m := mt.Finish(start.Add(2*time.Second), meter.OutcomeUnknown, "")
	if m.Usage.Source != meter.UsageReported {
		t.Fatalf("usage source %v, want reported", m.Usage.Source)
	}
	var tb Table
	if err := tb.Add("claude-sonnet-5", Price{Input: 3, Output: 15, CacheRead: ptr(0.30), CacheWrite: ptr(3.75)}); err != nil {
		t.Fatal(err)
	}
	p, ok := tb.Lookup(m.ResponseModel)
	if !ok {
		t.Fatalf("no price for %q", m.ResponseModel)
	}
	got, ok := p.Cost(m.Usage)
	const want = 0.01738845
	if !ok || math.Abs(got-want) > 1e-12 {
		t.Errorf("cost %v (usage %+v), want %v", got, m.Usage, want)
	}
}

// TestExamplePricingFile: the example file in examples/pricing loads, its
// image model is skipped, and a provider-prefixed name is found by the
// model's own name.
func TestExamplePricingFile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "examples", "pricing", "model_prices.example.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tb Table
	loaded, skipped, err := tb.LoadLiteLLM(data)
	if err != nil || loaded != 3 || skipped != 1 {
		t.Fatalf("loaded %d, skipped %d, %v; want 3, 1", loaded, skipped, err)
	}
	if p, ok := tb.Lookup("gemini-2.5-flash"); !ok || !near(p.Input, 0.30) || !near(p.Output, 2.50) {
		t.Errorf("gemini-2.5-flash: %+v, %v", p, ok)
	}
}
