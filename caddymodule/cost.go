package caddymodule

import (
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/cost"
	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/sink"
)

// ModelPrice is one price line: the models a pattern matches and their
// prices in US dollars per million tokens.
type ModelPrice struct {
	// Model is a model name as the response states it (else as the
	// request asked for it), or a pattern in which * stands for any run of
	// characters: "gpt-4o-mini*", "claude-sonnet-4-5*".
	Model string `json:"model"`
	// Input and Output are the prices of input and output tokens.
	Input  float64 `json:"input"`
	Output float64 `json:"output"`
	// CacheRead and CacheWrite price input read from and written to the
	// provider's prompt cache; left out, such tokens cost Input.
	CacheRead  *float64 `json:"cache_read,omitempty"`
	CacheWrite *float64 `json:"cache_write,omitempty"`
	// Reasoning prices reasoning tokens where a model prices them apart
	// from the rest of the output; left out, they cost Output.
	Reasoning *float64 `json:"reasoning,omitempty"`
}

// provisionCost builds the price table from the price lines, then the
// pricing file. The lines come first: a user's own line overrides the
// file's price for the models it matches.
func (h *Handler) provisionCost() error {
	if len(h.Prices) == 0 && h.PricingFile == "" {
		return nil
	}
	h.prices = new(cost.Table)
	for _, p := range h.Prices {
		if err := h.prices.Add(p.Model, cost.Price{Input: p.Input, Output: p.Output,
			CacheRead: p.CacheRead, CacheWrite: p.CacheWrite, Reasoning: p.Reasoning}); err != nil {
			return fmt.Errorf("price: %v", err)
		}
	}
	if h.PricingFile != "" {
		data, err := os.ReadFile(h.PricingFile)
		if err != nil {
			return fmt.Errorf("pricing_file: %v", err)
		}
		loaded, skipped, err := h.prices.LoadLiteLLM(data)
		if err != nil {
			return fmt.Errorf("pricing_file %s: %v", h.PricingFile, err)
		}
		h.logger.Info("loaded model prices", zap.String("file", h.PricingFile),
			zap.Int("models", loaded), zap.Int("without_token_prices", skipped))
	}
	return nil
}

// price sets r's cost when the handler has prices and r's counts may be
// billed by: reported or injected, or estimated with cost_from_estimates.
// The cost is of the billed counts where the provider reported them apart
// (Cohere's billed_units), else of the usage (cost.Price.CostOf), plus the
// usage of the other models that sampled inside the exchange (Anthropic's
// advisor) at their own prices (cost.Table.Exchange). An exchange with a
// model, its own or another, without a price is marked unpriced and that
// model logged once.
func (x *exchange) price(r *sink.Result) {
	h := x.h
	if h.prices.Empty() {
		return
	}
	if !r.OutputTokensReported() && !(h.CostFromEstimates && r.M.Usage.Source == meter.UsageEstimated) {
		return
	}
	usd, ok, unpriced := h.prices.Exchange(r.M, r.Model())
	if unpriced != "" {
		r.Unpriced = true
		if h.logOnce.first("unpriced", unpriced) {
			h.logger.Warn("no price for this model: its requests have no cost (add a price line or a pricing_file entry)",
				zap.String("model", unpriced))
		}
		return
	}
	r.Cost, r.HasCost = usd, ok
}
