package caddymodule

import (
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/tokentap/tokentap/internal/drift"
)

// DriftConfig sets the slowdown detector of the live stats rows this
// handler creates (package drift; docs/drift.md). Zero fields keep their
// defaults. A row is shared by every handler that records its provider,
// model and labels, and takes the thresholds of the first.
type DriftConfig struct {
	// RateDrop is the relative fall in output tokens/s to flag (0.30).
	RateDrop float64 `json:"rate_drop,omitempty"`
	// TTFTRise is the relative rise in time to first token to flag (0.50).
	TTFTRise float64 `json:"ttft_rise,omitempty"`
	// Evidence is the evidence, in nats, needed to flag and to clear (12):
	// higher is fewer false alarms and later flags.
	Evidence float64 `json:"evidence,omitempty"`
	// MinBaseline is how many requests a row needs before it is judged (64).
	MinBaseline int `json:"min_baseline,omitempty"`
}

func (c *DriftConfig) config() drift.Config {
	return drift.Config{RateDrop: c.RateDrop, TTFTRise: c.TTFTRise, Evidence: c.Evidence, MinBaseline: c.MinBaseline}
}

// provisionDrift checks the drift thresholds.
func (h *Handler) provisionDrift() error {
	if h.Drift == nil {
		return nil
	}
	c := h.Drift.config()
	if err := c.Validate(); err != nil {
		return fmt.Errorf("drift: %v", err)
	}
	h.drift = &c
	return nil
}

// unmarshalDrift reads a drift line: any of rate_drop, ttft_rise, evidence
// and min_baseline, each with its value.
func unmarshalDrift(d *caddyfile.Dispenser) (*DriftConfig, error) {
	args := d.RemainingArgs()
	if len(args) == 0 || len(args)%2 == 1 {
		return nil, d.Errf("drift wants any of rate_drop <share>, ttft_rise <share>, evidence <nats>, min_baseline <requests>")
	}
	c := new(DriftConfig)
	seen := map[string]bool{}
	for i := 0; i < len(args); i += 2 {
		name, v := args[i], args[i+1]
		if seen[name] {
			return nil, d.Errf("drift: %s given twice", name)
		}
		seen[name] = true
		switch name {
		case "rate_drop", "ttft_rise", "evidence", "min_baseline":
		default:
			return nil, d.Errf("drift: unknown setting %q (rate_drop, ttft_rise, evidence, min_baseline)", name)
		}
		if name == "min_baseline" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, d.Errf("drift: min_baseline %q is not a number of requests", v)
			}
			c.MinBaseline = n
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, d.Errf("drift: %s %q is not a number", name, v)
		}
		switch name {
		case "rate_drop":
			c.RateDrop = f
		case "ttft_rise":
			c.TTFTRise = f
		default:
			c.Evidence = f
		}
	}
	return c, nil
}
