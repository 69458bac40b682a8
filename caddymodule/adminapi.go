package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokentap/tokentap/internal/stats"
	"github.com/tokentap/tokentap/internal/web"
)

func init() {
	caddy.RegisterModule(AdminAPI{})
}

// AdminAPI serves the live stats on Caddy's admin endpoint, which every
// Caddy already has and which is bound to localhost by default:
//
//   - GET /tokentap/stats?window=5m: the comparison table as JSON (see
//     docs/live-stats.md)
//   - GET /tokentap/stats/sketches?window=5m: the window's raw, mergeable
//     state, which `tokentap stats --from` merges across instances
//   - GET /tokentap/stats/compare?a=<selector>&b=<selector>&window=5m: the
//     fair comparison of two sets of rows (stats.Comparison)
//   - GET /tokentap/: the comparison page
//
// Caddy loads every admin.api.* module by itself, with no configuration;
// this one has none.
type AdminAPI struct {
	store *stats.Store
	// live lists the requests in flight at an instant; nil lists none.
	live func(now time.Time) []stats.LiveRow
	page http.Handler
	now  func() time.Time
}

// CaddyModule returns the Caddy module information.
func (AdminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.tokentap",
		New: func() caddy.Module { return new(AdminAPI) },
	}
}

// Provision attaches the API to the process's live stats.
func (a *AdminAPI) Provision(caddy.Context) error {
	a.store = liveStats
	a.live = liveRows
	a.page = http.StripPrefix("/tokentap", web.Handler())
	a.now = time.Now
	return nil
}

// Routes returns the API's routes.
func (a *AdminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{
		{Pattern: "/tokentap/stats", Handler: caddy.AdminHandlerFunc(a.serveReport)},
		{Pattern: "/tokentap/stats/sketches", Handler: caddy.AdminHandlerFunc(a.serveSketches)},
		{Pattern: "/tokentap/stats/compare", Handler: caddy.AdminHandlerFunc(a.serveCompare)},
		{Pattern: "/tokentap/", Handler: caddy.AdminHandlerFunc(a.servePage)},
	}
}

// serveReport answers GET /tokentap/stats.
func (a *AdminAPI) serveReport(w http.ResponseWriter, r *http.Request) error {
	win, series, err := requestView(w, r)
	if err != nil {
		return err
	}
	now := a.now()
	return writeJSON(w, a.view(win, series, now).Report(now))
}

// view is the window's aggregate, with each row's series if asked.
func (a *AdminAPI) view(win stats.Window, series bool, now time.Time) *stats.Aggregate {
	var agg *stats.Aggregate
	if series {
		agg = a.store.Series(win, now)
	} else {
		agg = a.store.Aggregate(win, now)
	}
	if a.live != nil {
		agg.SetLive(a.live(now))
	}
	return agg
}

// serveSketches answers GET /tokentap/stats/sketches.
func (a *AdminAPI) serveSketches(w http.ResponseWriter, r *http.Request) error {
	win, series, err := requestView(w, r)
	if err != nil {
		return err
	}
	now := a.now()
	snap, err := a.view(win, series, now).Snapshot(now)
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	return writeJSON(w, snap)
}

// serveCompare answers GET /tokentap/stats/compare: parameters a and b
// (selectors), window (5m or 1h, default 5m) and cells (true or false,
// default false).
func (a *AdminAPI) serveCompare(w http.ResponseWriter, r *http.Request) error {
	win, _, err := requestView(w, r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	bad := func(err error) error { return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err} }
	if !win.HasStrata() {
		return bad(fmt.Errorf("window %s keeps no strata: compare in 5m or 1h", win))
	}
	sa, err := stats.ParseSelector(q.Get("a"))
	if err != nil {
		return bad(fmt.Errorf("a: %v", err))
	}
	sb, err := stats.ParseSelector(q.Get("b"))
	if err != nil {
		return bad(fmt.Errorf("b: %v", err))
	}
	cells := false
	if v := q.Get("cells"); v != "" {
		if cells, err = strconv.ParseBool(v); err != nil {
			return bad(fmt.Errorf("cells %q: use true or false", v))
		}
	}
	now := a.now()
	cmp, err := a.store.Aggregate(win, now).Compare(sa, sb, cells, now)
	if err != nil {
		// The selectors name no rows, or the same ones: the request's
		// fault, not the server's.
		return bad(err)
	}
	return writeJSON(w, cmp)
}

// servePage serves the page's embedded assets.
func (a *AdminAPI) servePage(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return methodNotAllowed(w, r, "GET, HEAD")
	}
	a.page.ServeHTTP(w, r)
	return nil
}

// requestView checks the method and reads the window parameter (default
// 5m) and the series parameter (true or false, default false).
func requestView(w http.ResponseWriter, r *http.Request) (stats.Window, bool, error) {
	if r.Method != http.MethodGet {
		return 0, false, methodNotAllowed(w, r, "GET")
	}
	q := r.URL.Query()
	series := false
	if v := q.Get("series"); v != "" {
		var err error
		if series, err = strconv.ParseBool(v); err != nil {
			return 0, false, caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("series %q: use true or false", v)}
		}
	}
	v := q.Get("window")
	if v == "" {
		return stats.DefaultWindow, series, nil
	}
	win, err := stats.ParseWindow(v)
	if err != nil {
		return 0, false, caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err}
	}
	return win, series, nil
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) error {
	w.Header().Set("Allow", allow)
	return caddy.APIError{
		HTTPStatus: http.StatusMethodNotAllowed,
		Err:        fmt.Errorf("method %s not allowed on %s: use %s", r.Method, r.URL.Path, allow),
	}
}

func writeJSON(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	w.Header().Set("Content-Type", "application/json")
	// A view of a sliding window is stale as soon as it is made.
	w.Header().Set("Cache-Control", "no-store")
	// A failed write means the client has gone; there is no one to tell.
	_, _ = w.Write(append(b, '\n'))
	return nil
}

// Interface guards
var (
	_ caddy.AdminRouter = (*AdminAPI)(nil)
	_ caddy.Provisioner = (*AdminAPI)(nil)
)
