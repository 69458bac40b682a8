package simulator

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("tokentap_simulator", parseCaddyfile)
	// A terminal handler, like file_server: it goes where a site's
	// responder would.
	httpcaddyfile.RegisterDirectiveOrder("tokentap_simulator", httpcaddyfile.Before, "file_server")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	var sim Handler
	err := sim.UnmarshalCaddyfile(h.Dispenser)
	return &sim, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	tokentap_simulator {
//		time_to_first_token <duration>
//		tokens_per_second   <rate>
//		jitter              <fraction>
//		output_tokens       <count>
//		batch_slowdown      <fraction>
//		prefill_tokens_per_second <rate>
//		usage               auto|always|never
//		seed                <int>
//		fail_status         <status>
//		fail_status_body    json|none
//		error_after         <count>
//		truncate_after      <count>
//		abort_after         <count>
//		model <name> {
//			time_to_first_token <duration>
//			tokens_per_second   <rate>
//			jitter              <fraction>
//			output_tokens       <count>
//			batch_slowdown      <fraction>
//			prefill_tokens_per_second <rate>
//		}
//	}
//
// Every subdirective is optional and may appear once (model once per name);
// the block itself may be omitted for all defaults.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume directive name
	if d.NextArg() {
		return d.ArgErr()
	}

	seen := make(map[string]bool)
	for d.NextBlock(0) {
		sub := d.Val()
		if sub != "model" {
			if seen[sub] {
				return d.Errf("duplicate tokentap_simulator subdirective '%s'", sub)
			}
			seen[sub] = true
		}
		if ok, err := unmarshalProfileField(d, &h.Profile); ok || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		switch sub {
		case "usage":
			v, err := singleArg(d)
			if err != nil {
				return err
			}
			if !validUsage(v) {
				return d.Errf("usage must be auto, always or never, got '%s'", v)
			}
			h.Usage = v

		case "seed":
			v, err := singleArg(d)
			if err != nil {
				return err
			}
			seed, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return d.Errf("parsing seed: %v", err)
			}
			h.Seed = seed

		case "fail_status":
			status, err := intArg(d)
			if err != nil {
				return err
			}
			if status < 400 || status > 599 {
				return d.Errf("fail_status must be from 400 to 599, got %d", status)
			}
			h.FailStatus = status

		case "fail_status_body":
			v, err := singleArg(d)
			if err != nil {
				return err
			}
			if v != StatusBodyJSON && v != StatusBodyNone {
				return d.Errf("fail_status_body must be json or none, got '%s'", v)
			}
			h.FailStatusBody = v

		case "error_after", "truncate_after", "abort_after":
			n, err := intArg(d)
			if err != nil {
				return err
			}
			switch sub {
			case "error_after":
				h.ErrorAfter = &n
			case "truncate_after":
				h.TruncateAfter = &n
			default:
				h.AbortAfter = &n
			}

		case "model":
			if err := h.unmarshalModel(d); err != nil {
				return err
			}

		default:
			return d.Errf("unrecognized tokentap_simulator subdirective '%s'", sub)
		}
	}
	return nil
}

// unmarshalModel reads `model <name> { … }`.
func (h *Handler) unmarshalModel(d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	name := d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	if _, dup := h.Models[name]; dup {
		return d.Errf("duplicate model '%s'", name)
	}
	var p Profile
	seen := make(map[string]bool)
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if seen[sub] {
			return d.Errf("duplicate subdirective '%s' in model '%s'", sub, name)
		}
		seen[sub] = true
		ok, err := unmarshalProfileField(d, &p)
		if err != nil {
			return err
		}
		if !ok {
			return d.Errf("unrecognized subdirective '%s' in model '%s'", sub, name)
		}
	}
	if h.Models == nil {
		h.Models = make(map[string]Profile)
	}
	h.Models[name] = p
	return nil
}

// unmarshalProfileField reads the profile subdirective at the cursor, if it
// is one, and reports whether it was.
func unmarshalProfileField(d *caddyfile.Dispenser, p *Profile) (bool, error) {
	switch d.Val() {
	case "time_to_first_token":
		v, err := singleArg(d)
		if err != nil {
			return true, err
		}
		dur, err := caddy.ParseDuration(v)
		if err != nil {
			return true, d.Errf("parsing time_to_first_token: %v", err)
		}
		if dur < 0 {
			return true, d.Errf("time_to_first_token must not be negative, got %s", v)
		}
		p.TimeToFirstToken = caddy.Duration(dur)

	case "tokens_per_second", "jitter", "batch_slowdown", "prefill_tokens_per_second":
		name := d.Val()
		v, err := singleArg(d)
		if err != nil {
			return true, err
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return true, d.Errf("parsing %s: %v", name, err)
		}
		switch name {
		case "jitter":
			if err := checkJitter(f); err != nil {
				return true, d.Errf("jitter %v", err)
			}
			p.Jitter = f
		case "tokens_per_second":
			if err := checkRate(f, false); err != nil {
				return true, d.Errf("tokens_per_second %v", err)
			}
			p.TokensPerSecond = f
		case "batch_slowdown":
			if err := checkRate(f, true); err != nil {
				return true, d.Errf("batch_slowdown %v", err)
			}
			p.BatchSlowdown = f
		default:
			if err := checkRate(f, true); err != nil {
				return true, d.Errf("prefill_tokens_per_second %v", err)
			}
			p.PrefillTokensPerSecond = f
		}

	case "output_tokens":
		n, err := intArg(d)
		if err != nil {
			return true, err
		}
		if n < 1 || n > MaxOutputTokens {
			return true, d.Errf("output_tokens must be from 1 to %d, got %d", MaxOutputTokens, n)
		}
		p.OutputTokens = n

	case "rate_limit_requests":
		n, err := intArg(d)
		if err != nil {
			return true, err
		}
		if n < 1 {
			return true, d.Errf("rate_limit_requests must be at least 1, got %d", n)
		}
		p.RateLimitRequests = n

	default:
		return false, nil
	}
	return true, nil
}

// singleArg reads the one argument of the subdirective at the cursor.
func singleArg(d *caddyfile.Dispenser) (string, error) {
	var v string
	if !d.AllArgs(&v) {
		return "", d.ArgErr()
	}
	return v, nil
}

// intArg reads the one non-negative integer argument of the subdirective at
// the cursor.
func intArg(d *caddyfile.Dispenser) (int, error) {
	name := d.Val()
	v, err := singleArg(d)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, d.Errf("%s must be a non-negative integer, got '%s'", name, v)
	}
	return n, nil
}
