package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("tokentap", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("tokentap", httpcaddyfile.Before, "reverse_proxy")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	t := new(Handler)
	err := t.UnmarshalCaddyfile(h.Dispenser)
	return t, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	tokentap [<matcher>] {
//		provider          <name>
//		dialect           <name>
//		max_request_body  <size>
//		max_response_body <size>
//		max_event_size    <size>
//		stall_threshold   <duration>
//		inject_usage
//		tokenizer         o200k_base|cl100k_base|none
//		label             <name> <value>
//		max_label_values  <n>
//		capture_content   [<max_size>|on|off]
//		conversation_id   <value>
//		langfuse
//		price             <model> input <usd> output <usd> [cache_read <usd>] [cache_write <usd>] [reasoning <usd>]
//		pricing_file      <path>
//		cost_from_estimates
//		slo               [<model>] [ttft <duration>] [tps <tokens/s>] [duration <duration>]
//		slo_headers       [strip|keep]
//		drift             [rate_drop <share>] [ttft_rise <share>] [evidence <nats>] [min_baseline <requests>]
//		record            <file> [roll_size <size>] [roll_keep <n>]
//	}
//
// label may be repeated, once per name; its value, and conversation_id's,
// may use placeholders. price may be repeated, once per model pattern;
// prices are US dollars per million tokens. slo may be repeated, once per
// model pattern (default "*"); the first line that matches a model is its
// objective.
//
// The directive is ordered before reverse_proxy. Put it in the same handle
// block as the reverse_proxy it measures. Probes of a route are the
// tokentap_probe global option's (probe.go).
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := map[string]bool{}
	for d.NextBlock(0) {
		opt := d.Val()
		if opt == "label" {
			var name, value string
			if !d.Args(&name, &value) {
				return d.ArgErr()
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			if _, dup := h.Labels[name]; dup {
				return d.Errf("label %s already specified", name)
			}
			if h.Labels == nil {
				h.Labels = map[string]string{}
			}
			h.Labels[name] = value
			continue
		}
		if opt == "price" {
			p, err := unmarshalPrice(d)
			if err != nil {
				return err
			}
			for _, q := range h.Prices {
				if q.Model == p.Model {
					return d.Errf("price %s already specified", p.Model)
				}
			}
			h.Prices = append(h.Prices, p)
			continue
		}
		if opt == "slo" {
			s, err := unmarshalSLO(d)
			if err != nil {
				return err
			}
			for _, q := range h.SLOs {
				if q.Model == s.Model {
					return d.Errf("slo %s already specified", s.Model)
				}
			}
			h.SLOs = append(h.SLOs, s)
			continue
		}
		if seen[opt] {
			return d.Errf("%s already specified", opt)
		}
		seen[opt] = true
		if opt == "inject_usage" || opt == "langfuse" || opt == "cost_from_estimates" {
			if d.NextArg() {
				return d.ArgErr()
			}
			switch opt {
			case "langfuse":
				h.Langfuse = true
			case "cost_from_estimates":
				h.CostFromEstimates = true
			default:
				h.InjectUsage = true
			}
			continue
		}
		if opt == "capture_content" {
			if err := h.unmarshalCaptureContent(d); err != nil {
				return err
			}
			continue
		}
		if opt == "record" {
			c, err := unmarshalRecord(d)
			if err != nil {
				return err
			}
			h.Record = c
			continue
		}
		if opt == "slo_headers" {
			if err := h.unmarshalSLOHeaders(d); err != nil {
				return err
			}
			continue
		}
		if opt == "drift" {
			c, err := unmarshalDrift(d)
			if err != nil {
				return err
			}
			h.Drift = c
			continue
		}
		var arg string
		if !d.Args(&arg) {
			return d.ArgErr()
		}
		if d.NextArg() {
			return d.ArgErr()
		}
		switch opt {
		case "conversation_id":
			h.ConversationID = arg
		case "pricing_file":
			h.PricingFile = arg
		case "provider":
			h.Provider = arg
		case "dialect":
			h.Dialect = arg
		case "tokenizer":
			h.Tokenizer = arg
		case "verify_usage":
			share, err := strconv.ParseFloat(arg, 64)
			if err != nil || !(share > 0 && share <= 1) {
				return d.Errf("verify_usage: want a share in (0, 1], got %q", arg)
			}
			h.VerifyUsage = share
		case "max_request_body", "max_response_body", "max_event_size":
			size, err := humanize.ParseBytes(arg)
			if err != nil {
				return d.Errf("parsing %s: %v", opt, err)
			}
			switch opt {
			case "max_request_body":
				h.MaxRequestBody = int64(size)
			case "max_response_body":
				h.MaxResponseBody = int64(size)
			default:
				h.MaxEventSize = int64(size)
			}
		case "max_label_values":
			n, err := strconv.Atoi(arg)
			if err != nil || n < 1 {
				return d.Errf("max_label_values must be a positive integer: %s", arg)
			}
			h.MaxLabelValues = n
		case "stall_threshold":
			dur, err := caddy.ParseDuration(arg)
			if err != nil {
				return d.Errf("parsing stall_threshold: %v", err)
			}
			h.StallThreshold = caddy.Duration(dur)
		default:
			return d.Errf("unrecognized tokentap option '%s'", opt)
		}
	}
	return nil
}

// unmarshalPrice reads a price line's arguments: the model pattern, then
// input and output, then any of cache_read, cache_write and reasoning,
// each followed by its price.
func unmarshalPrice(d *caddyfile.Dispenser) (ModelPrice, error) {
	args := d.RemainingArgs()
	if len(args) < 5 || len(args)%2 == 0 {
		return ModelPrice{}, d.Errf("price wants <model> input <usd> output <usd>, then any of cache_read, cache_write, reasoning with their prices")
	}
	p := ModelPrice{Model: args[0]}
	seen := map[string]bool{}
	for i := 1; i < len(args); i += 2 {
		name := args[i]
		v, err := strconv.ParseFloat(args[i+1], 64)
		if err != nil {
			return ModelPrice{}, d.Errf("price %s: %s %q is not a number of dollars per million tokens", p.Model, name, args[i+1])
		}
		if seen[name] {
			return ModelPrice{}, d.Errf("price %s: %s given twice", p.Model, name)
		}
		seen[name] = true
		switch name {
		case "input":
			p.Input = v
		case "output":
			p.Output = v
		case "cache_read":
			p.CacheRead = &v
		case "cache_write":
			p.CacheWrite = &v
		case "reasoning":
			p.Reasoning = &v
		default:
			return ModelPrice{}, d.Errf("price %s: unknown price %q (input, output, cache_read, cache_write, reasoning)", p.Model, name)
		}
	}
	if !seen["input"] || !seen["output"] {
		return ModelPrice{}, d.Errf("price %s: input and output are required", p.Model)
	}
	return p, nil
}
