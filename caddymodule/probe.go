package caddymodule

import (
	"cmp"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddypki"
	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/probe"
)

func init() {
	caddy.RegisterModule(ProbeApp{})
	httpcaddyfile.RegisterGlobalOption("tokentap_probe", parseProbeOption)
}

// ProbeApp is the tokentap_probe app: it sends a small, fixed streaming
// request to each target at an interval, through tokentap's own route, so
// that the request is measured like live traffic, lands in the model's
// live stats row (a baseline when traffic is thin, and food for its
// slowdown detector) and is marked tokentap.probe on its span, metric
// points and access log entry. It is opt-in: without this app, nothing is
// sent.
//
// Each target gets at most one probe per interval and at most one in
// flight; a tick that finds the previous probe still running is skipped
// and counted, never queued. What the prober did is at the admin API's
// /debug/vars (tokentap_probe: sent, failed, skipped, canceled per
// target); failures are logged once per change of a target's state.
type ProbeApp struct {
	// Interval is the default time between two probes of a target: at
	// least 1s. Default: 1m.
	Interval caddy.Duration `json:"interval,omitempty"`
	// Timeout is the default bound on one probe, from sending it to the
	// end of its stream: at most 5m. Default: 30s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// MaxTokens is the default output cap asked for
	// (max_completion_tokens for OpenAI, max_tokens for Anthropic): 1 to
	// 256. Default: 16.
	MaxTokens int `json:"max_tokens,omitempty"`
	// Prompt is the default user message, at most 4096 bytes. Default:
	// "Count from 1 to 100, one number per line.", which asks for more
	// than the cap, so the stream runs to max_tokens.
	Prompt string `json:"prompt,omitempty"`
	// Targets are the routes and models to probe, at most 64.
	Targets []ProbeTarget `json:"targets,omitempty"`

	prober *probe.Prober
	logger *zap.Logger
	ctx    caddy.Context
	// resolved are the targets as provisioned, placeholders replaced.
	resolved []probe.Target
}

// ProbeTarget is one route and model to probe. The fields left zero take
// the app's.
type ProbeTarget struct {
	// Name identifies the target in logs and in /debug/vars; unique.
	Name string `json:"name"`
	// URL is the endpoint on tokentap's own route, so that the probe is
	// measured: the API's full path (…/chat/completions, …/v1/messages)
	// or a base URL as the SDKs take it (http://localhost:8080/openai/v1),
	// which the API's path is appended to. Placeholders such as
	// {env.PORT} are replaced when the app is provisioned.
	URL string `json:"url"`
	// API is the request's format: "openai" (Chat Completions) or
	// "anthropic" (Messages). Default: "openai".
	API string `json:"api,omitempty"`
	// Model is the model asked for.
	Model string `json:"model"`
	// Headers are added to each probe, after the API's own; values may
	// use placeholders, replaced once when the app is provisioned, so
	// that credentials come from the environment:
	// {"Authorization": ["Bearer {env.OPENAI_API_KEY}"]}. A placeholder
	// that is unknown or empty is an error. Header values are never
	// logged. Tokentap-Probe is the app's own and may not be set.
	Headers http.Header `json:"headers,omitempty"`
	// Interval, Timeout, MaxTokens and Prompt override the app's for
	// this target.
	Interval  caddy.Duration `json:"interval,omitempty"`
	Timeout   caddy.Duration `json:"timeout,omitempty"`
	MaxTokens int            `json:"max_tokens,omitempty"`
	Prompt    string         `json:"prompt,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (ProbeApp) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "tokentap_probe",
		New: func() caddy.Module { return new(ProbeApp) },
	}
}

// Provision resolves the placeholders and checks the configuration. The
// prober is made at Start, once the CA it may have to trust is known.
func (a *ProbeApp) Provision(ctx caddy.Context) error {
	a.logger = ctx.Logger()
	a.ctx = ctx
	targets, err := a.targets(caddy.NewReplacer())
	if err != nil {
		return err
	}
	a.resolved = targets
	return probe.Check(targets)
}

// caddyRoots is the system's certificate authorities plus the root of
// each CA that Caddy's PKI app runs in this config (the one `tls
// internal` issues from), or nil when it runs none. The PKI app is loaded
// by whatever uses it, in no set order among the apps, so this is asked
// when the apps start, not when this one is provisioned.
func caddyRoots(ctx caddy.Context) *x509.CertPool {
	app, err := ctx.AppIfConfigured("pki")
	if err != nil {
		return nil
	}
	pki, ok := app.(*caddypki.PKI)
	if !ok || len(pki.CAs) == 0 {
		return nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	for _, ca := range pki.CAs {
		if root := ca.RootCertificate(); root != nil {
			pool.AddCert(root)
		}
	}
	return pool
}

// targets turns the configuration into the prober's targets: the app's
// defaults applied and the placeholders replaced. Errors never quote a
// replaced value, which may be a credential.
func (a *ProbeApp) targets(repl *caddy.Replacer) ([]probe.Target, error) {
	var errs []error
	out := make([]probe.Target, 0, len(a.Targets))
	for i, pt := range a.Targets {
		t := probe.Target{
			Name:      pt.Name,
			API:       pt.API,
			Model:     pt.Model,
			MaxTokens: cmp.Or(pt.MaxTokens, a.MaxTokens),
			Prompt:    cmp.Or(pt.Prompt, a.Prompt),
			Interval:  time.Duration(cmp.Or(pt.Interval, a.Interval)),
			Timeout:   time.Duration(cmp.Or(pt.Timeout, a.Timeout)),
		}
		u, err := repl.ReplaceOrErr(pt.URL, true, true)
		if err != nil {
			errs = append(errs, fmt.Errorf("target %d (%q): url: %w", i, pt.Name, err))
		}
		t.URL = u
		for name, values := range pt.Headers {
			for _, v := range values {
				rv, err := repl.ReplaceOrErr(v, true, true)
				if err != nil {
					errs = append(errs, fmt.Errorf("target %d (%q): header %s: %w", i, pt.Name, name, err))
					continue
				}
				if t.Header == nil {
					t.Header = http.Header{}
				}
				t.Header.Add(name, rv)
			}
		}
		out = append(out, t)
	}
	return out, errors.Join(errs...)
}

// Start makes the prober and starts probing. When Caddy runs a CA of its
// own in this config, the prober trusts it besides the system's
// authorities, so that a route served with `tls internal` can be probed
// over HTTPS.
func (a *ProbeApp) Start() error {
	p, err := a.newProber()
	if err != nil {
		return err
	}
	a.prober = p
	for _, t := range a.prober.Targets() {
		a.logger.Info("probing",
			zap.String("target", t.Name),
			zap.String("model", t.Model),
			zap.String("api", t.API),
			zap.Duration("interval", t.Interval),
			zap.Int("max_tokens", t.MaxTokens))
	}
	a.prober.Start()
	return nil
}

// newProber makes the prober of the provisioned targets, not started.
func (a *ProbeApp) newProber() (*probe.Prober, error) {
	return probe.New(a.resolved, probe.Options{OnChange: a.logChange, RootCAs: caddyRoots(a.ctx)})
}

// Stop cancels the probes in flight and waits for the prober's goroutines,
// so that a reload leaves none of the old config's behind.
func (a *ProbeApp) Stop() error {
	if a.prober != nil {
		a.prober.Stop()
	}
	return nil
}

// logChange logs a target's first result and each change between
// completing and failing: a target that is down logs once, not once per
// interval. The target's headers, which hold credentials, are never
// logged, nor its URL, whose query might.
func (a *ProbeApp) logChange(t *probe.Target, err error) {
	if err != nil {
		a.logger.Warn("probe failing",
			zap.String("target", t.Name), zap.String("model", t.Model), zap.Error(err))
		return
	}
	a.logger.Info("probe completing", zap.String("target", t.Name), zap.String("model", t.Model))
}

// parseProbeOption reads the tokentap_probe global option:
//
//	{
//		tokentap_probe {
//			interval   <duration>
//			timeout    <duration>
//			max_tokens <n>
//			prompt     <text>
//			target <name> <url> <model> [api openai|anthropic] {
//				header     <field> <value>
//				interval   <duration>
//				timeout    <duration>
//				max_tokens <n>
//				prompt     <text>
//			}
//		}
//	}
//
// target may be repeated, once per name; its block is optional, and
// header may be repeated. The top-level settings are every target's
// defaults; a target's own win. Header values and URLs may use
// placeholders, {env.OPENAI_API_KEY} for instance.
func parseProbeOption(d *caddyfile.Dispenser, existing any) (any, error) {
	if existing != nil {
		return nil, d.Err("tokentap_probe already specified")
	}
	app := new(ProbeApp)
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "tokentap_probe", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile sets up the app from the global option's tokens (see
// parseProbeOption). Bounds are checked here too, so that a Caddyfile's
// error names its line.
func (a *ProbeApp) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the option's name
	if d.NextArg() {
		return d.ArgErr()
	}
	seen := map[string]bool{}
	names := map[string]bool{}
	for d.NextBlock(0) {
		opt := d.Val()
		if opt == "target" {
			t, err := unmarshalProbeTarget(d)
			if err != nil {
				return err
			}
			if names[t.Name] {
				return d.Errf("target %s already specified", t.Name)
			}
			names[t.Name] = true
			a.Targets = append(a.Targets, t)
			continue
		}
		if seen[opt] {
			return d.Errf("%s already specified", opt)
		}
		seen[opt] = true
		if err := unmarshalProbeSetting(d, "", opt, &a.Interval, &a.Timeout, &a.MaxTokens, &a.Prompt); err != nil {
			return err
		}
	}
	if len(a.Targets) == 0 {
		return d.Err("tokentap_probe needs at least one target")
	}
	if len(a.Targets) > probe.MaxTargets {
		return d.Errf("tokentap_probe: at most %d targets, got %d", probe.MaxTargets, len(a.Targets))
	}
	return nil
}

// unmarshalProbeTarget reads a target line and its optional block.
func unmarshalProbeTarget(d *caddyfile.Dispenser) (ProbeTarget, error) {
	var t ProbeTarget
	args := d.RemainingArgs()
	switch {
	case len(args) == 5 && args[3] == "api":
		t.API = args[4]
		if err := probe.CheckAPI(t.API); err != nil {
			return t, d.Errf("target %s: %v", args[0], err)
		}
	case len(args) != 3:
		return t, d.Err("target wants <name> <url> <model> [api openai|anthropic]")
	}
	t.Name, t.URL, t.Model = args[0], args[1], args[2]
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if opt == "header" {
			var name, value string
			if !d.Args(&name, &value) || d.NextArg() {
				return t, d.Errf("target %s: header wants <field> <value>", t.Name)
			}
			if http.CanonicalHeaderKey(name) == probe.Header {
				return t, d.Errf("target %s: header %s is the probe's own and may not be set", t.Name, probe.Header)
			}
			if t.Headers == nil {
				t.Headers = http.Header{}
			}
			t.Headers.Add(name, value)
			continue
		}
		if seen[opt] {
			return t, d.Errf("target %s: %s already specified", t.Name, opt)
		}
		seen[opt] = true
		if err := unmarshalProbeSetting(d, "target "+t.Name+": ", opt, &t.Interval, &t.Timeout, &t.MaxTokens, &t.Prompt); err != nil {
			return t, err
		}
	}
	return t, nil
}

// unmarshalProbeSetting reads one of the settings that the app and each
// target share, checking its bounds; where prefixes its errors.
func unmarshalProbeSetting(d *caddyfile.Dispenser, where, opt string, interval, timeout *caddy.Duration, maxTokens *int, prompt *string) error {
	fail := func(err error) error { return d.Errf("%s%v", where, err) }
	var arg string
	if !d.Args(&arg) || d.NextArg() {
		return fail(fmt.Errorf("%s wants one value", opt))
	}
	switch opt {
	case "interval", "timeout":
		dur, err := caddy.ParseDuration(arg)
		if err != nil {
			return fail(fmt.Errorf("parsing %s: %v", opt, err))
		}
		if dur == 0 {
			return fail(fmt.Errorf("%s must not be 0", opt))
		}
		check, dst := probe.CheckInterval, interval
		if opt == "timeout" {
			check, dst = probe.CheckTimeout, timeout
		}
		if err := check(dur); err != nil {
			return fail(err)
		}
		*dst = caddy.Duration(dur)
	case "max_tokens":
		n, err := strconv.Atoi(arg)
		if err != nil || n == 0 {
			return fail(fmt.Errorf("max_tokens must be an integer from 1 to %d, got %q", probe.MaxTokensLimit, arg))
		}
		if err := probe.CheckMaxTokens(n); err != nil {
			return fail(err)
		}
		*maxTokens = n
	case "prompt":
		if arg == "" {
			return fail(errors.New("prompt must not be empty"))
		}
		if err := probe.CheckPrompt(arg); err != nil {
			return fail(err)
		}
		*prompt = arg
	default:
		return fail(fmt.Errorf("unrecognized tokentap_probe option '%s'", opt))
	}
	return nil
}

// Interface guards
var (
	_ caddy.App             = (*ProbeApp)(nil)
	_ caddy.Provisioner     = (*ProbeApp)(nil)
	_ caddyfile.Unmarshaler = (*ProbeApp)(nil)
)
