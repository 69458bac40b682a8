package caddymodule

import (
	"fmt"

	"github.com/tokentap/tokentap/internal/meter/tokencount"
)

// DefaultTokenizer is the encoding that counts the output of streams that
// report no usage when tokenizer is not set: what current OpenAI models use,
// and the streams that lack usage are OpenAI-style ones.
const DefaultTokenizer = "o200k_base"

// provisionTokenizer loads the configured tokenizer's vocabulary now (once
// per process; docs/telemetry.md says what it costs), so that the first
// stream to need it is not the one that waits.
func (h *Handler) provisionTokenizer() error {
	name := h.Tokenizer
	if name == "" {
		name = DefaultTokenizer
	}
	if name == "none" {
		h.cfg.Estimator = nil
		return nil
	}
	c, err := tokencount.New(name)
	if err != nil {
		return fmt.Errorf("tokenizer: %v", err)
	}
	if err := c.Load(); err != nil {
		return fmt.Errorf("loading tokenizer %s: %v", name, err)
	}
	h.cfg.Estimator = c
	return nil
}
