package caddymodule

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/tokentap/tokentap/internal/exchange"
	"github.com/tokentap/tokentap/internal/slo"
)

// ModelSLO is one objective line: the models a pattern matches and the
// thresholds each of their requests must meet. Unset thresholds are not
// part of the objective; at least one must be set.
type ModelSLO struct {
	// Model is a model name as the response states it (else as the
	// request asked for it), or a pattern in which * stands for any run of
	// characters; "*" (the Caddyfile's default) matches every model.
	Model string `json:"model"`
	// TimeToFirstToken is the longest time to first token that meets.
	TimeToFirstToken caddy.Duration `json:"time_to_first_token,omitempty"`
	// OutputTokensPerSecond is the lowest output rate that meets; only
	// requests with a rate (tokens streamed after the first) are held to it.
	OutputTokensPerSecond float64 `json:"output_tokens_per_second,omitempty"`
	// Duration is the longest exchange that meets.
	Duration caddy.Duration `json:"duration,omitempty"`
}

// sloHeaderModes are slo_headers' values.
var sloHeaderModes = map[string]exchange.SLOHeaders{
	"":      exchange.SLOHeadersOff,
	"strip": exchange.SLOHeadersStrip,
	"keep":  exchange.SLOHeadersKeep,
}

// provisionSLO builds the objective table from the slo lines, in order:
// the first line whose pattern matches a model is its objective; and
// whether requests may state their own.
func (h *Handler) provisionSLO() error {
	mode, ok := sloHeaderModes[h.SLOHeaders]
	if !ok {
		return fmt.Errorf("slo_headers %q: want strip or keep", h.SLOHeaders)
	}
	h.cfg.SLOHeaders = mode
	if len(h.SLOs) == 0 {
		return nil
	}
	h.cfg.SLOs = new(slo.Table)
	for _, s := range h.SLOs {
		if err := h.cfg.SLOs.Add(s.Model, slo.Objective{
			TimeToFirstToken:      time.Duration(s.TimeToFirstToken),
			OutputTokensPerSecond: s.OutputTokensPerSecond,
			Duration:              time.Duration(s.Duration),
		}); err != nil {
			return fmt.Errorf("slo: %v", err)
		}
	}
	return nil
}

// unmarshalSLOHeaders reads `slo_headers [strip|keep]`; strip is the
// default.
func (h *Handler) unmarshalSLOHeaders(d *caddyfile.Dispenser) error {
	h.SLOHeaders = "strip"
	if d.NextArg() {
		h.SLOHeaders = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	if _, ok := sloHeaderModes[h.SLOHeaders]; !ok || h.SLOHeaders == "" {
		return d.Errf("slo_headers %q: want strip or keep", h.SLOHeaders)
	}
	return nil
}

// unmarshalSLO reads an slo line's arguments: an optional model pattern
// (default "*"), then any of ttft <duration>, tps <tokens per second> and
// duration <duration>.
func unmarshalSLO(d *caddyfile.Dispenser) (ModelSLO, error) {
	args := d.RemainingArgs()
	s := ModelSLO{Model: "*"}
	if len(args)%2 == 1 {
		s.Model, args = args[0], args[1:]
	}
	if len(args) == 0 {
		return s, d.Errf("slo wants [<model>] then any of ttft <duration>, tps <tokens per second>, duration <duration>")
	}
	seen := map[string]bool{}
	for i := 0; i < len(args); i += 2 {
		name, v := args[i], args[i+1]
		if seen[name] {
			return s, d.Errf("slo %s: %s given twice", s.Model, name)
		}
		seen[name] = true
		switch name {
		case "ttft", "duration":
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return s, d.Errf("slo %s: %s %q is not a positive duration", s.Model, name, v)
			}
			if name == "ttft" {
				s.TimeToFirstToken = caddy.Duration(dur)
			} else {
				s.Duration = caddy.Duration(dur)
			}
		case "tps":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f > 0) || math.IsInf(f, 0) {
				return s, d.Errf("slo %s: tps %q is not a positive number of tokens per second", s.Model, v)
			}
			s.OutputTokensPerSecond = f
		default:
			return s, d.Errf("slo %s: unknown threshold %q (ttft, tps, duration)", s.Model, name)
		}
	}
	return s, nil
}
