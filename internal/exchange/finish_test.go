package exchange

import (
	"math"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tokentap/tokentap/internal/cost"
	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/sink"
)

// linePrice is a price line: a model pattern and its input and output
// prices per million tokens.
type linePrice struct {
	model         string
	input, output float64
}

// priceTable builds prices as the Caddy handler does: the lines first, then
// the pricing file (LiteLLM's format), when there is one.
func priceTable(t *testing.T, lines []linePrice, file string) *cost.Table {
	t.Helper()
	tab := new(cost.Table)
	for _, l := range lines {
		if err := tab.Add(l.model, cost.Price{Input: l.input, Output: l.output}); err != nil {
			t.Fatal(err)
		}
	}
	if file != "" {
		if _, _, err := tab.LoadLiteLLM([]byte(file)); err != nil {
			t.Fatal(err)
		}
	}
	return tab
}

// TestPriceRules: reported and injected counts are priced; estimated ones
// only with cost_from_estimates; a model without a price is marked
// unpriced and logged once however often it comes; the pricing file's
// prices apply after the lines'. Billed counts (Cohere's billed_units) are the bill
// where both are known: the recorded Cohere text stream's 12 billed input
// and 7 output tokens at $2.50 and $10 per million cost 12 × 2.5 + 7 × 10
// = 100 dollars per million, $0.0001, not the 507 × 2.5 + 10 × 10 =
// 1,367.5 of its processed counts, which are priced only without them.
func TestPriceRules(t *testing.T) {
	usage := func(src meter.UsageSource) meter.Usage {
		return meter.Usage{InputTokens: 1000, OutputTokens: 100, CacheReadInputTokens: -1, CacheCreationInputTokens: -1, ReasoningOutputTokens: -1, Source: src}
	}
	// The recorded Cohere text stream's counts (meter's TestRecordedCohere).
	cohere := func(src meter.UsageSource) meter.Usage {
		return meter.Usage{InputTokens: 507, OutputTokens: 10, CacheReadInputTokens: 448, CacheCreationInputTokens: -1, ReasoningOutputTokens: -1, Source: src}
	}
	none := meter.BilledUsage{InputTokens: -1, OutputTokens: -1}
	cohereBill := meter.BilledUsage{InputTokens: 12, OutputTokens: 7}
	tests := []struct {
		name      string
		estimates bool
		model     string
		usage     meter.Usage
		billed    meter.BilledUsage
		want      float64
		priced    bool
		unpriced  bool
	}{
		{"reported", false, "line-model", usage(meter.UsageReported), none, (1000*2 + 100*8) / 1e6, true, false},
		{"injected", false, "line-model", usage(meter.UsageInjected), none, (1000*2 + 100*8) / 1e6, true, false},
		{"estimated: not a bill", false, "line-model", usage(meter.UsageEstimated), none, 0, false, false},
		{"estimated with cost_from_estimates", true, "line-model", usage(meter.UsageEstimated), none, (1000*2 + 100*8) / 1e6, true, false},
		{"no usage", false, "line-model", meter.Usage{InputTokens: -1, OutputTokens: -1, Source: meter.UsageAbsent}, none, 0, false, false},
		{"the file's price, by the model's own name", false, "file-model", usage(meter.UsageReported), none, (1000*1 + 100*2) / 1e6, true, false},
		{"no price", false, "other-model", usage(meter.UsageReported), none, 0, false, true},
		{"Cohere: billed_units are the bill", false, "command-a-03-2025", cohere(meter.UsageReported), cohereBill, 0.0001, true, false},
		{"Cohere without billed_units: the processed counts", false, "command-a-03-2025", cohere(meter.UsageReported), none, 0.0013675, true, false},
		{"Cohere with input billed alone: the processed counts", false, "command-a-03-2025", cohere(meter.UsageReported), meter.BilledUsage{InputTokens: 12, OutputTokens: -1}, 0.0013675, true, false},
		{"Cohere estimated, billed or not: not a bill", false, "command-a-03-2025", cohere(meter.UsageEstimated), cohereBill, 0, false, false},
		{"Cohere without a price: unpriced however billed", false, "command-r-plus", cohere(meter.UsageReported), cohereBill, 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			prices := priceTable(t, []linePrice{{"line-*", 2, 8}, {"command-a-*", 2.5, 10}},
				`{"openai/file-model":{"input_cost_per_token":1e-06,"output_cost_per_token":2e-06}}`)
			mw := New(Config{Prices: prices, CostFromEstimates: tt.estimates, Logger: zap.New(core)})
			x := &exchange{mw: mw}
			for range 3 {
				r := &sink.Result{M: &meter.Measurement{ResponseModel: tt.model, Usage: tt.usage, Billed: tt.billed}}
				x.price(r)
				if r.HasCost != tt.priced || math.Abs(r.Cost-tt.want) > 1e-15 || r.Unpriced != tt.unpriced {
					t.Fatalf("cost %v (has %v), unpriced %v; want %v (%v), %v", r.Cost, r.HasCost, r.Unpriced, tt.want, tt.priced, tt.unpriced)
				}
			}
			if n := logs.FilterField(zap.String("model", tt.model)).Len(); n != map[bool]int{true: 1}[tt.unpriced] {
				t.Errorf("%d log lines for %s, want one for an unpriced model, else none", n, tt.model)
			}
		})
	}
	// Another model's usage inside the exchange (Anthropic's advisor) is
	// priced at that model's price: 1,000 × 2 + 100 × 8 for line-model
	// and 60 × 5 + 40 × 25 for the advisor, 4,100 dollars per million; an
	// advisor without a price leaves the exchange unpriced and is the
	// model logged.
	for _, tt := range []struct {
		name, advisor    string
		want             float64
		priced, unpriced bool
	}{
		{"another model at its own price", "line-advisor", 0.0041, true, false},
		{"another model without a price: unpriced", "opus-unpriced", 0, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			mw := New(Config{Prices: priceTable(t, []linePrice{{"line-advisor", 5, 25}, {"line-*", 2, 8}}, ""), Logger: zap.New(core)})
			x := &exchange{mw: mw}
			for range 3 {
				m := &meter.Measurement{ResponseModel: "line-model", Usage: usage(meter.UsageReported), Billed: none}
				m.OtherModels[0] = meter.ModelUsage{Model: tt.advisor, Kind: "advisor_message", InputTokens: 60, OutputTokens: 40, CacheReadInputTokens: -1, CacheCreationInputTokens: -1}
				m.NumOtherModels = 1
				r := &sink.Result{M: m}
				x.price(r)
				if r.HasCost != tt.priced || math.Abs(r.Cost-tt.want) > 1e-15 || r.Unpriced != tt.unpriced {
					t.Fatalf("cost %v (has %v), unpriced %v; want %v (%v), %v", r.Cost, r.HasCost, r.Unpriced, tt.want, tt.priced, tt.unpriced)
				}
			}
			if n := logs.FilterField(zap.String("model", tt.advisor)).Len(); n != map[bool]int{true: 1}[tt.unpriced] {
				t.Errorf("%d log lines for %s, want one for an unpriced model, else none", n, tt.advisor)
			}
		})
	}
}
