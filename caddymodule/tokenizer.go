package caddymodule

import (
	"fmt"

	"github.com/tokentap/tokentap/internal/meter/tokencount"
	"github.com/tokentap/tokentap/internal/meter/usagecheck"
)

// DefaultTokenizer is the encoding that counts the output of streams that
// report no usage when tokenizer is not set: what current OpenAI models use,
// and the streams that lack usage are OpenAI-style ones.
const DefaultTokenizer = "o200k_base"

// provisionTokenizer loads, now, the vocabularies that a configured
// feature can use (once per process; docs/telemetry.md says what one
// costs), so that the first stream to need one is not the one that waits,
// and no other: the estimator's, unless no stream of the route can lack
// usage (inject_usage asks for it, or the dialect is one whose streams
// the estimator never counts); and with verify_usage, every encoding of
// the check's table.
func (h *Handler) provisionTokenizer() error {
	v, err := usagecheck.New(h.VerifyUsage)
	if err != nil {
		return err
	}
	h.cfg.VerifyUsage = v
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
	h.cfg.Estimator = c
	if !h.estimatorUsable() {
		// Set, so a stream that does need it still counts, loading the
		// vocabulary then.
		return nil
	}
	if err := c.Load(); err != nil {
		return fmt.Errorf("loading tokenizer %s: %v", name, err)
	}
	return nil
}

// estimatorUsable reports whether a stream of this route can lack usage
// and be counted by the estimator: only Chat Completions streams are
// (meter.Estimator), and none of them lacks usage under inject_usage.
func (h *Handler) estimatorUsable() bool {
	if h.InjectUsage {
		return false
	}
	return h.Dialect == "" || h.Dialect == "openai_chat"
}
