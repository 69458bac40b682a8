package caddymodule

import (
	"fmt"
	"os"

	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/cost"
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
	h.cfg.Prices = new(cost.Table)
	for _, p := range h.Prices {
		if err := h.cfg.Prices.Add(p.Model, cost.Price{Input: p.Input, Output: p.Output,
			CacheRead: p.CacheRead, CacheWrite: p.CacheWrite, Reasoning: p.Reasoning}); err != nil {
			return fmt.Errorf("price: %v", err)
		}
	}
	if h.PricingFile != "" {
		data, err := os.ReadFile(h.PricingFile)
		if err != nil {
			return fmt.Errorf("pricing_file: %v", err)
		}
		loaded, skipped, err := h.cfg.Prices.LoadLiteLLM(data)
		if err != nil {
			return fmt.Errorf("pricing_file %s: %v", h.PricingFile, err)
		}
		h.logger.Info("loaded model prices", zap.String("file", h.PricingFile),
			zap.Int("models", loaded), zap.Int("without_token_prices", skipped))
	}
	return nil
}
