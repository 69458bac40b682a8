package cost

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/meter"
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

// TestCostOf: an exchange whose provider reported billed counts (Cohere's
// billed_units) costs billed input × Input + billed output × Output, with
// no cache or reasoning terms, since billed units leave out the cached
// input; without both billed counts it costs its usage, as Cost. The usage
// is the recorded Cohere text stream's (507 processed input tokens, 448
// of them cached, 10 output; 12 and 7 billed), at Command A's $2.50 and
// $10 per million with a made-up $0.25 cached price to show it unused.
func TestCostOf(t *testing.T) {
	cohere := Price{Input: 2.5, Output: 10, CacheRead: ptr(0.25)}
	usage := meter.Usage{InputTokens: 507, OutputTokens: 10, CacheReadInputTokens: 448, CacheCreationInputTokens: -1, ReasoningOutputTokens: -1, Source: meter.UsageReported}
	unknown := meter.Usage{InputTokens: -1, OutputTokens: -1, CacheReadInputTokens: -1, CacheCreationInputTokens: -1, ReasoningOutputTokens: -1}
	tests := []struct {
		name   string
		price  Price
		usage  meter.Usage
		billed meter.BilledUsage
		want   float64
		ok     bool
	}{
		// 12 × 2.5 + 7 × 10 = 100 dollars per million.
		{"billed counts are the bill: no cache terms", cohere, usage, meter.BilledUsage{InputTokens: 12, OutputTokens: 7}, 0.0001, true},
		// 59 × 2.5 + 448 × 0.25 + 10 × 10 = 359.5 dollars per million.
		{"no billed counts: the usage's cost", cohere, usage, meter.BilledUsage{InputTokens: -1, OutputTokens: -1}, 0.0003595, true},
		{"input billed alone: the usage's cost", cohere, usage, meter.BilledUsage{InputTokens: 12, OutputTokens: -1}, 0.0003595, true},
		{"a zero bill costs nothing", cohere, usage, meter.BilledUsage{}, 0, true},
		{"billed counts without usage are still a bill", cohere, unknown, meter.BilledUsage{InputTokens: 12, OutputTokens: 7}, 0.0001, true},
		// 8 × 2.5 + 50 × 10 = 520: the recorded reasoning stream's bill.
		{"a reasoning price does not split billed output", Price{Input: 2.5, Output: 10, Reasoning: ptr(40)},
			meter.Usage{InputTokens: 1394, OutputTokens: 54, CacheReadInputTokens: 1360, ReasoningOutputTokens: 30}, meter.BilledUsage{InputTokens: 8, OutputTokens: 50}, 0.00052, true},
		{"nothing known: no cost", cohere, unknown, meter.BilledUsage{InputTokens: -1, OutputTokens: -1}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.price.CostOf(&meter.Measurement{Usage: tt.usage, Billed: tt.billed})
			if ok != tt.ok || math.Abs(got-tt.want) > 1e-15 {
				t.Errorf("CostOf = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestCostOfRecordedCohere: real recorded Cohere v2 streams
// (internal/meter/testdata/recorded/cohere, whose source SURVEY.md names) measured
// by the meter and priced at Command A's $2.50 input and $10 output per
// million tokens cost their message-end's billed_units, computed by hand,
// not the processed usage.tokens, which gen_ai.usage.* still report: the
// text stream bills 12 input and 7 output tokens, 12 × 2.5 + 7 × 10 = 100
// dollars per million, $0.0001, where its 507 processed input and 10
// output tokens would cost 1,367.5 per million, $0.0013675.
func TestCostOfRecordedCohere(t *testing.T) {
	tests := []struct {
		name, file      string
		in, out         int64 // usage.tokens, processed
		bill, processed float64
	}{
		// 12 × 2.5 + 7 × 10 = 100; 507 × 2.5 + 10 × 10 = 1,367.5.
		{"text", "chat_text.sse", 507, 10, 0.0001, 0.0013675},
		// 8 × 2.5 + 50 × 10 = 520; 1,394 × 2.5 + 54 × 10 = 4,025.
		{"thinking", "chat_reasoning.sse", 1394, 54, 0.00052, 0.004025},
		// 119 × 2.5 + 44 × 10 = 737.5; 1,549 × 2.5 + 95 × 10 = 4,822.5.
		{"tool plan and two calls", "chat_tool_calls.sse", 1549, 95, 0.0007375, 0.0048225},
		// 46 × 2.5 + 14 × 10 = 255; 1,445 × 2.5 + 43 × 10 = 4,042.5.
		{"a call without arguments", "chat_tool_call_no_args.sse", 1445, 43, 0.000255, 0.0040425},
	}
	var tb Table
	if err := tb.Add("command-a-*", Price{Input: 2.5, Output: 10}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join("..", "meter", "testdata", "recorded", "cohere", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			info, _ := meter.LookupDialect("cohere_chat")
			var mt meter.Meter
			start := time.Now()
			mt.Init(info.New(), meter.Options{}, start)
			mt.Request("/v2/chat", []byte(`{"model":"command-a-03-2025","stream":true}`), false)
			mt.Response(200, "text/event-stream", "")
			mt.Write(body, start.Add(time.Second))
			m := mt.Finish(start.Add(2*time.Second), meter.OutcomeUnknown, "")
			if m.Usage.Source != meter.UsageReported || m.Usage.InputTokens != tt.in || m.Usage.OutputTokens != tt.out || !m.Billed.Known() {
				t.Fatalf("usage %+v, billed %+v; want %d in and %d out reported, and billed counts", m.Usage, m.Billed, tt.in, tt.out)
			}
			// Cohere names no model in the response: the request's.
			p, ok := tb.Lookup(m.Request.Model)
			if !ok {
				t.Fatalf("no price for %q", m.Request.Model)
			}
			if got, ok := p.CostOf(m); !ok || math.Abs(got-tt.bill) > 1e-15 {
				t.Errorf("cost %v (billed %+v), want %v", got, m.Billed, tt.bill)
			}
			if got, ok := p.Cost(m.Usage); !ok || math.Abs(got-tt.processed) > 1e-15 {
				t.Errorf("the processed counts' cost %v, want %v", got, tt.processed)
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
// with code execution and the prompt cache; internal/meter/testdata/recorded/README.md
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
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "pricing", "model_prices.example.json"))
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

// TestExchange: an exchange costs its response model's usage at that
// model's price plus each other model's usage inside it at that model's
// own price; a model of either kind without a price leaves the exchange
// unpriced, naming that model, rather than billing part of it.
func TestExchange(t *testing.T) {
	var tb Table
	for _, p := range []struct {
		model string
		price Price
	}{
		{"claude-sonnet-4-6", Price{Input: 3, Output: 15, CacheRead: ptr(0.30), CacheWrite: ptr(3.75)}},
		{"claude-opus-4-7", Price{Input: 5, Output: 25, CacheRead: ptr(0.50), CacheWrite: ptr(6.25)}},
	} {
		if err := tb.Add(p.model, p.price); err != nil {
			t.Fatal(err)
		}
	}
	usage := meter.Usage{InputTokens: 100, OutputTokens: 10, CacheReadInputTokens: -1, CacheCreationInputTokens: -1, ReasoningOutputTokens: -1, Source: meter.UsageReported}
	measurement := func(others ...meter.ModelUsage) *meter.Measurement {
		m := &meter.Measurement{Usage: usage, Billed: meter.BilledUsage{InputTokens: -1, OutputTokens: -1}}
		m.NumOtherModels = copy(m.OtherModels[:], others)
		return m
	}
	tests := []struct {
		name     string
		m        *meter.Measurement
		model    string
		want     float64
		ok       bool
		unpriced string
	}{
		// 100 × 3 + 10 × 15 = 450 per million.
		{"no other model: the response model's cost", measurement(), "claude-sonnet-4-6", 0.00045, true, ""},
		// 450 + (20 × 5 + 30 × 0.50 + 10 × 6.25) + 40 × 25 = 450 + 177.5 + 1000.
		{"an advisor at its own price, its cache at its own rates", measurement(meter.ModelUsage{Model: "claude-opus-4-7", Kind: "advisor_message",
			InputTokens: 60, OutputTokens: 40, CacheReadInputTokens: 30, CacheCreationInputTokens: 10}), "claude-sonnet-4-6", 0.0016275, true, ""},
		{"the advisor's model without a price: unpriced, named", measurement(meter.ModelUsage{Model: "claude-opus-9", Kind: "advisor_message",
			InputTokens: 60, OutputTokens: 40, CacheReadInputTokens: -1, CacheCreationInputTokens: -1}), "claude-sonnet-4-6", 0, false, "claude-opus-9"},
		{"the response model without a price: unpriced, named", measurement(meter.ModelUsage{Model: "claude-opus-4-7", Kind: "advisor_message",
			InputTokens: 60, OutputTokens: 40}), "claude-haiku-9", 0, false, "claude-haiku-9"},
		{"the advisor's output unknown: no cost", measurement(meter.ModelUsage{Model: "claude-opus-4-7", Kind: "advisor_message",
			InputTokens: 60, OutputTokens: -1}), "claude-sonnet-4-6", 0, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, unpriced := tb.Exchange(tt.m, tt.model)
			if ok != tt.ok || unpriced != tt.unpriced || math.Abs(got-tt.want) > 1e-15 {
				t.Errorf("Exchange = %v, %v, %q; want %v, %v, %q", got, ok, unpriced, tt.want, tt.ok, tt.unpriced)
			}
		})
	}
}

// TestExchangeRecordedAdvisor: the recorded advisor body
// (internal/meter/testdata/recorded/anthropic/advisor_body.json) measured by the
// meter, at $3 and $15 per million for the executor, claude-sonnet-4-6,
// and $5 and $25 for the advisor, claude-opus-4-7, costs by hand 2,414 ×
// 3 + 3,200 × 15 = 55,242 for the executor and 2,728 × 5 + 874 × 25 =
// 35,490 for the advisor: 90,732 dollars per million, $0.090732. Summed
// into the executor's counts, as they once were, the same usage priced
// (2,414 + 2,728) × 3 + (3,200 + 874) × 15 = 76,536, $0.076536.
func TestExchangeRecordedAdvisor(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("..", "meter", "testdata", "recorded", "anthropic", "advisor_body.json"))
	if err != nil {
		t.Fatal(err)
	}
	info, _ := meter.LookupDialect("anthropic_messages")
	var mt meter.Meter
	start := time.Now()
	mt.Init(info.New(), meter.Options{}, start)
	mt.Request("/v1/messages", []byte(`{"model":"claude-sonnet-4-6","max_tokens":8192}`), false)
	mt.Response(200, "application/json", "")
	mt.Write(body, start.Add(time.Second))
	m := mt.Finish(start.Add(2*time.Second), meter.OutcomeUnknown, "")
	var tb Table
	if err := tb.Add("claude-sonnet-4-6", Price{Input: 3, Output: 15}); err != nil {
		t.Fatal(err)
	}
	if err := tb.Add("claude-opus-4-7", Price{Input: 5, Output: 25}); err != nil {
		t.Fatal(err)
	}
	got, ok, unpriced := tb.Exchange(m, m.ResponseModel)
	const want = 0.090732
	if !ok || unpriced != "" || math.Abs(got-want) > 1e-12 {
		t.Errorf("cost %v, %v, %q (usage %+v, others %+v), want %v", got, ok, unpriced, m.Usage, m.OtherModelUsage(), want)
	}
}
