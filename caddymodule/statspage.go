package caddymodule

import (
	"errors"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tokentap/tokentap/internal/web"
)

func init() {
	caddy.RegisterModule(StatsPage{})
	httpcaddyfile.RegisterHandlerDirective("tokentap_stats", parseStatsPage)
	httpcaddyfile.RegisterDirectiveOrder("tokentap_stats", httpcaddyfile.Before, "respond")
}

// StatsPage serves the live stats and the comparison page on an ordinary
// site, as the admin API does at /tokentap/. The admin API refuses what a
// browser sends for an address typed into it (Caddy 2.11 checks the origin
// of every request that carries Sec-Fetch-Mode), so a page people open by
// hand needs a site of its own; this also lets a deployment put the page
// behind its own authentication. Mount it with its prefix stripped:
//
//	handle_path /tokentap/* {
//		tokentap_stats
//	}
//
// Below the prefix, stats, stats/sketches and stats/compare are the JSON of
// the admin API (docs/live-stats.md) and everything else is the page.
type StatsPage struct {
	api AdminAPI
}

// CaddyModule returns the Caddy module information.
func (StatsPage) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.tokentap_stats",
		New: func() caddy.Module { return new(StatsPage) },
	}
}

// Provision attaches the handler to the process's live stats.
func (s *StatsPage) Provision(caddy.Context) error {
	s.api = AdminAPI{store: liveStats, live: liveRows, page: web.Handler(), now: time.Now}
	return nil
}

// ServeHTTP answers from the live stats; it never calls next.
func (s *StatsPage) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	var err error
	switch r.URL.Path {
	case "/stats":
		err = s.api.serveReport(w, r)
	case "/stats/sketches":
		err = s.api.serveSketches(w, r)
	case "/stats/compare":
		err = s.api.serveCompare(w, r)
	default:
		err = s.api.servePage(w, r)
	}
	var apiErr caddy.APIError
	if errors.As(err, &apiErr) {
		return caddyhttp.Error(apiErr.HTTPStatus, apiErr.Err)
	}
	return err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	tokentap_stats
//
// It takes no options.
func (s *StatsPage) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // consume directive name
	if d.NextArg() || d.NextBlock(0) {
		return d.ArgErr()
	}
	return nil
}

func parseStatsPage(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	s := new(StatsPage)
	err := s.UnmarshalCaddyfile(h.Dispenser)
	return s, err
}

// Interface guards
var (
	_ caddy.Provisioner           = (*StatsPage)(nil)
	_ caddyhttp.MiddlewareHandler = (*StatsPage)(nil)
	_ caddyfile.Unmarshaler       = (*StatsPage)(nil)
)
