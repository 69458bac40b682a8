package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tokentap/tokentap/internal/web"
)

// fakeStats plays GET /tokentap/stats: it answers the document or the raw
// body the test sets, with the window fields of the window asked for, as the
// real API does, and records the windows the page asked for.
type fakeStats struct {
	mu      sync.Mutex
	status  int
	doc     *statsDoc
	raw     string
	windows []string

	// GET stats/compare: the comparison or the raw body to answer, and
	// the queries asked.
	compareStatus int
	compareDoc    *compareDoc
	compareRaw    string
	compares      []url.Values
}

var windowSeconds = map[string]int{"1m": 60, "5m": 300, "1h": 3600, "24h": 86400}

func (f *fakeStats) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/stats/compare") {
		f.serveCompareHTTP(w, r)
		return
	}
	window := r.URL.Query().Get("window")
	f.mu.Lock()
	f.windows = append(f.windows, window)
	status, raw := f.status, f.raw
	var doc statsDoc
	if f.doc != nil {
		doc = f.doc.clone()
	}
	f.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	if _, ok := windowSeconds[window]; !ok {
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":"window must be 1m, 5m or 1h"}`))
		return
	}
	if raw != "" {
		w.WriteHeader(status)
		w.Write([]byte(raw))
		return
	}
	doc.Window, doc.WindowSeconds = window, windowSeconds[window]
	json.NewEncoder(w).Encode(doc)
}

func (f *fakeStats) serve(d statsDoc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.doc, f.raw = http.StatusOK, &d, ""
}

func (f *fakeStats) fail(status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.doc, f.raw = status, nil, body
}

// serveCompareHTTP plays GET stats/compare as the real API does for the
// window: 400 for a window without strata, else the comparison set, with
// the window asked for.
func (f *fakeStats) serveCompareHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f.mu.Lock()
	f.compares = append(f.compares, q)
	status, raw := f.compareStatus, f.compareRaw
	var doc compareDoc
	if f.compareDoc != nil {
		doc = *f.compareDoc
	}
	f.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	window := q.Get("window")
	if window != "5m" && window != "1h" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":"window %s keeps no strata: compare in 5m or 1h"}`, window)
		return
	}
	if raw != "" {
		w.WriteHeader(status)
		w.Write([]byte(raw))
		return
	}
	doc.Window, doc.WindowSeconds = window, windowSeconds[window]
	json.NewEncoder(w).Encode(doc)
}

func (f *fakeStats) serveCompare(d compareDoc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.compareStatus, f.compareDoc, f.compareRaw = http.StatusOK, &d, ""
}

func (f *fakeStats) failCompare(status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.compareStatus, f.compareDoc, f.compareRaw = status, nil, body
}

// compareQueries returns the queries of stats/compare so far.
func (f *fakeStats) compareQueries() []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.compares)
}

func (f *fakeStats) lastWindow() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.windows) == 0 {
		return ""
	}
	return f.windows[len(f.windows)-1]
}

// adminGuard does to browser requests what Caddy's admin API (v2.11) does
// before any route sees them: a no-cors request (a classic <script> or a
// plain stylesheet <link>) is refused, and a request a browser marks with
// Sec-Fetch-Mode must name the admin origin in its Origin or else its
// Referer. With it, this fast test catches a page that would not load from
// the real admin API. Refusals are recorded for the test to report.
type adminGuard struct {
	next    http.Handler
	mu      sync.Mutex
	refused []string
}

func (g *adminGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mode := r.Header.Get("Sec-Fetch-Mode")
	reason := ""
	if strings.Contains(mode, "no-cors") {
		reason = "no-cors mode"
	} else if _, hasOrigin := r.Header["Origin"]; mode != "" || hasOrigin {
		origin := r.Header.Get("Origin")
		if origin == "" {
			origin = r.Header.Get("Referer")
		}
		if u, err := url.Parse(origin); err != nil || u.Host != r.Host {
			reason = "origin " + strconv.Quote(origin) + " is not the admin origin"
		}
	}
	if reason != "" {
		g.mu.Lock()
		g.refused = append(g.refused, r.URL.Path+": "+reason)
		g.mu.Unlock()
		http.Error(w, `{"error":"`+reason+`"}`, http.StatusForbidden)
		return
	}
	g.next.ServeHTTP(w, r)
}

func (g *adminGuard) check(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.refused {
		t.Errorf("Caddy's admin API would refuse the page's request for %s", r)
	}
}

// plain turns the narrow no-break spaces the page puts between numbers and
// units into spaces, so expectations stay readable.
func plain(s string) string { return strings.ReplaceAll(s, "\u202f", " ") }

// TestPage drives the page in headless Chromium against a fake stats API:
// what it renders, how it sorts, the window selector, refreshes, and what it
// says when the API fails or has no traffic. The steps share one page, in
// order, as a user would go through them.
func TestPage(t *testing.T) {
	b := newBrowser(t)
	fixture := readFixture(t, "testdata/stats.json")
	api := &fakeStats{}
	api.serve(fixture)

	mux := http.NewServeMux()
	mux.Handle("/tokentap/stats", api)
	mux.Handle("/tokentap/stats/compare", api)
	mux.Handle("/tokentap/", http.StripPrefix("/tokentap", web.Handler()))
	guard := &adminGuard{next: mux}
	srv := httptest.NewServer(guard)
	defer srv.Close()

	// A short refresh keeps the test fast; the default is 3 s. Opened as
	// from a link on the admin origin, as the guard (and Caddy) requires.
	page := srv.URL + "/tokentap/"
	b.navigate(t, page+"?refresh=0.3", page)

	tpsOrder := orderBy(fixture.Rows, byQuantile("output_tokens_per_second", "p50"), true)

	// A second document, as the next refresh would bring: a new, faster
	// model and more requests on an old one.
	refreshed := fixture.clone()
	fast := fixture.clone().Rows[0]
	fast.Model, fast.Provider, fast.Labels = "gpt-5-nano", "openai", map[string]string{}
	p50 := 210.0
	fast.Metrics["output_tokens_per_second"] = statsMetric{Unit: "{token}/s", Count: 12, P50: &p50, P95: &p50}
	refreshed.Rows = append(refreshed.Rows, fast)
	refreshed.Rows[2].Requests = 150

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"renders one row per provider, model and labels", func(t *testing.T) {
			b.waitFor(t, "the first data", `document.body.dataset.state === 'ok'`, 10*time.Second)
			got := rows(t, b)
			if len(got) != len(fixture.Rows) {
				t.Fatalf("%d rows rendered, want %d: %v", len(got), len(fixture.Rows), models(got))
			}
			for _, want := range fixture.Rows {
				i := slices.IndexFunc(got, func(r renderedRow) bool {
					return r.Provider == want.Provider && r.Model == want.Model && r.Labels == labelText(want.Labels)
				})
				if i < 0 {
					t.Errorf("no row for %s %s", want.Provider, rowName(want))
					continue
				}
				r := got[i]
				if r.Overflow != want.Overflow {
					t.Errorf("%s: overflow %v, want %v", rowName(want), r.Overflow, want.Overflow)
				}
				if r.Cells["requests"].Value != strconv.FormatInt(want.Requests, 10) {
					t.Errorf("%s: requests %q, want %d", rowName(want), r.Cells["requests"].Value, want.Requests)
				}
				for col, q := range map[string][2]string{
					"ttft_p50": {"time_to_first_token", "p50"},
					"tps_p50":  {"output_tokens_per_second", "p50"},
					"tps_p5":   {"output_tokens_per_second", "p5"},
				} {
					v, ok := want.quantile(q[0], q[1])
					cell := r.Cells[col]
					if !ok {
						if cell.Value != "" || cell.Text != "–" {
							t.Errorf("%s %s: %+v, want the missing mark", rowName(want), col, cell)
						}
						continue
					}
					if g, err := strconv.ParseFloat(cell.Value, 64); err != nil || g != v {
						t.Errorf("%s %s: data-value %q, want %v", rowName(want), col, cell.Value, v)
					}
				}
			}
		}},
		{"formats numbers with units", func(t *testing.T) {
			got := rows(t, b)
			cases := []struct{ model, col, want string }{
				{"claude-haiku-4-5", "ttft_p50", "412 ms"},
				{"claude-haiku-4-5", "tps_p50", "143 tok/s"},
				{"gpt-4o-mini", "tps_p50", "95.3 tok/s"},
				{"gpt-4o-mini", "error_rate", "1.7 %"},
				{"gpt-4o-mini", "ttfvt_p50", "–"},
				{"claude-haiku-4-5", "tpot_p50", "7.0 ms"},
				{"claude-haiku-4-5", "duration_p50", "3.21 s"},
				{"gpt-4o", "duration_p95", "9.10 s"},
				{"claude-haiku-4-5", "input_tokens_p50", "1,212 tok"},
				{"claude-haiku-4-5", "output_tokens_p50", "412 tok"},
				{"gpt-4o", "estimated_share", "25.0 %"},
				{"gpt-4o", "buffered", "3"},
				{"claude-haiku-4-5", "buffered", "0"},
				{"_other", "error_rate", "100.0 %"},
				{"_other", "tps_p50", "–"},
				{"_other", "requests", "7"},
				{"claude-haiku-4-5", "cost_p50", "$0.00327"},
				{"gpt-4o", "cost_p95", "$0.0310"},
				{"gpt-4o", "cost_usd", "$0.610"},
				{"gpt-4o-mini", "cost_p50", "–"},
				{"gpt-4o-mini", "cost_usd", "–"},
				{"claude-haiku-4-5", "slo_attainment", "89.7 %"},
				{"claude-haiku-4-5", "health", "ok"},
				{"gpt-4o-mini", "health", "slow"},
				{"gpt-4o", "health", "–"},
				{"_other", "health", "–"},
				{"claude-haiku-4-5", "slo_goodput", "96.1 tok/s"},
				{"gpt-4o", "slo_attainment", "–"},
				{"gpt-4o", "usage_ratio", "1.021"},
				{"gpt-4o", "usage_mismatches", "1"},
				{"claude-haiku-4-5", "usage_ratio", "–"},
				{"claude-haiku-4-5", "throttled_rate", "3.8 %"},
				{"gpt-4o", "throttled_rate", "0 %"},
				{"claude-haiku-4-5", "rl_requests", "90.0 %"},
				{"claude-haiku-4-5", "rl_tokens", "25.0 %"},
				{"claude-haiku-4-5", "rl_reset", "2.50 s"},
				{"gpt-4o-mini", "rl_requests", "5.0 %"},
				{"gpt-4o-mini", "rl_tokens", "–"},
				{"gpt-4o-mini", "rl_reset", "45.0 s"},
				{"gpt-4o", "rl_requests", "–"},
			}
			for _, c := range cases {
				i := slices.IndexFunc(got, func(r renderedRow) bool { return r.Model == c.model })
				if i < 0 {
					t.Fatalf("no row %s", c.model)
				}
				if g := plain(got[i].Cells[c.col].Text); g != c.want {
					t.Errorf("%s %s = %q, want %q", c.model, c.col, g, c.want)
				}
			}
			// A row with buffered streams stands out; one without does not.
			marked := eval[[]string](t, b, `[...document.querySelectorAll('#comparison td[data-col="buffered"].buffered')].map((td) => td.closest('tr').dataset.model)`)
			if !slices.Equal(marked, []string{"gpt-4o"}) {
				t.Errorf("buffered cells marked in rows %v, want [gpt-4o]", marked)
			}
		}},
		{"writes names and labels as text, never as markup", func(t *testing.T) {
			got := rows(t, b)
			i := slices.IndexFunc(got, func(r renderedRow) bool { return r.Model == "gpt-4o" })
			if want := "app=<b>bold</b>, team=chat"; i < 0 || got[i].Cells["labels"].Text != want {
				t.Errorf("labels cell: %+v, want the text %q", got, want)
			}
			if n := eval[int](t, b, `document.querySelectorAll('#comparison b, svg b').length`); n != 0 {
				t.Errorf("%d <b> elements made from a label value", n)
			}
			if hidden := eval[bool](t, b, `getComputedStyle(document.querySelector('th[data-col="labels"]')).display === 'none'`); hidden {
				t.Error("the labels column is hidden although rows have labels")
			}
		}},
		{"a slow row is named in a banner, with its reason, and marked in words", func(t *testing.T) {
			banner := eval[map[string]any](t, b, `(e => ({hidden: e.hidden, text: e.textContent, models: [...e.querySelectorAll('p')].map(p => p.dataset.model)}))(document.getElementById('health-banner'))`)
			if banner["hidden"] != false || fmt.Sprint(banner["models"]) != "[gpt-4o-mini]" {
				t.Fatalf("banner %+v, want shown, naming gpt-4o-mini only", banner)
			}
			for _, want := range []string{"Slow: gpt-4o-mini (team=search)", "p50 output tokens/s 61.2, 36 % below its baseline of 95.6"} {
				if !strings.Contains(banner["text"].(string), want) {
					t.Errorf("banner %q does not say %q", banner["text"], want)
				}
			}
			cell := eval[map[string]any](t, b, `(td => ({text: td.textContent, title: td.title, slow: td.classList.contains('slow')}))(document.querySelector('tr[data-model="gpt-4o-mini"] td[data-col="health"]'))`)
			if cell["text"] != "slow" || cell["slow"] != true || !strings.Contains(cell["title"].(string), "36 % below") {
				t.Errorf("health cell %+v, want the word slow, marked, with the reason as its title", cell)
			}
			healthy := fixture.clone()
			for i := range healthy.Rows {
				if healthy.Rows[i].Health != nil && healthy.Rows[i].Health.State == "slow" {
					healthy.Rows[i].Health.State = "ok"
				}
			}
			api.serve(healthy)
			b.waitFor(t, "the banner to go", `document.getElementById('health-banner').hidden`, 10*time.Second)
			api.serve(fixture)
			b.waitFor(t, "the banner to come back", `!document.getElementById('health-banner').hidden`, 10*time.Second)
		}},
		{"shows the SLO columns only when some row was judged", func(t *testing.T) {
			shown := `[...document.querySelectorAll('th[data-col^="slo_"], th[data-group="slo"], td[data-col^="slo_"]')].filter(e => getComputedStyle(e).display !== 'none').length`
			if n := eval[int](t, b, shown); n != 3+2*len(fixture.Rows) {
				t.Errorf("%d SLO headings and cells shown, want %d", n, 3+2*len(fixture.Rows))
			}
			unjudged := fixture.clone()
			for i := range unjudged.Rows {
				unjudged.Rows[i].SLO = nil
			}
			api.serve(unjudged)
			b.waitFor(t, "the SLO columns to go", `document.getElementById('comparison').classList.contains('no-slo')`, 10*time.Second)
			if n := eval[int](t, b, shown); n != 0 {
				t.Errorf("%d SLO headings and cells shown without any objective", n)
			}
			api.serve(fixture)
			b.waitFor(t, "the SLO columns to come back", `!document.getElementById('comparison').classList.contains('no-slo')`, 10*time.Second)
		}},
		{"shows the usage check columns only when some row was verified", func(t *testing.T) {
			shown := `[...document.querySelectorAll('th[data-col^="usage_"], th[data-group="usage"], td[data-col^="usage_"]')].filter(e => getComputedStyle(e).display !== 'none').length`
			if n := eval[int](t, b, shown); n != 3+2*len(fixture.Rows) {
				t.Errorf("%d usage check headings and cells shown, want %d", n, 3+2*len(fixture.Rows))
			}
			unverified := fixture.clone()
			for i := range unverified.Rows {
				unverified.Rows[i].UsageCheck = nil
			}
			api.serve(unverified)
			b.waitFor(t, "the usage check columns to go", `document.getElementById('comparison').classList.contains('no-usage')`, 10*time.Second)
			if n := eval[int](t, b, shown); n != 0 {
				t.Errorf("%d usage check headings and cells shown without a verified request", n)
			}
			api.serve(fixture)
			b.waitFor(t, "the usage check columns to come back", `!document.getElementById('comparison').classList.contains('no-usage')`, 10*time.Second)
		}},
		{"shows the rate limit columns only when some row reported one", func(t *testing.T) {
			shown := `[...document.querySelectorAll('th[data-col^="rl_"], th[data-group="rl"], td[data-col^="rl_"]')].filter(e => getComputedStyle(e).display !== 'none').length`
			if n := eval[int](t, b, shown); n != 4+3*len(fixture.Rows) {
				t.Errorf("%d rate limit headings and cells shown, want %d", n, 4+3*len(fixture.Rows))
			}
			unreported := fixture.clone()
			for i := range unreported.Rows {
				unreported.Rows[i].RateLimit = nil
			}
			api.serve(unreported)
			b.waitFor(t, "the rate limit columns to go", `document.getElementById('comparison').classList.contains('no-rl')`, 10*time.Second)
			if n := eval[int](t, b, shown); n != 0 {
				t.Errorf("%d rate limit headings and cells shown without any report", n)
			}
			api.serve(fixture)
			b.waitFor(t, "the rate limit columns to come back", `!document.getElementById('comparison').classList.contains('no-rl')`, 10*time.Second)
		}},
		{"shows the cost columns only when some row has a price", func(t *testing.T) {
			shown := `[...document.querySelectorAll('th[data-col^="cost_"], th[data-group="cost"]')].filter(th => getComputedStyle(th).display !== 'none').length`
			if n := eval[int](t, b, shown); n != 4 {
				t.Errorf("%d cost headings shown, want 4 (the group and p50, p95, total)", n)
			}
			unpriced := fixture.clone()
			for i := range unpriced.Rows {
				unpriced.Rows[i].CostUSD = 0
				unpriced.Rows[i].Metrics["cost"] = statsMetric{Unit: "{USD}"}
			}
			api.serve(unpriced)
			b.waitFor(t, "the cost columns to go", `document.getElementById('comparison').classList.contains('no-cost')`, 10*time.Second)
			if n := eval[int](t, b, shown+` + [...document.querySelectorAll('td[data-col^="cost_"]')].filter(td => getComputedStyle(td).display !== 'none').length`); n != 0 {
				t.Errorf("%d cost headings and cells shown without any price", n)
			}
			api.serve(fixture)
			b.waitFor(t, "the cost columns to come back", `!document.getElementById('comparison').classList.contains('no-cost')`, 10*time.Second)
		}},
		{"sorts by output tokens/s p50, fastest first", func(t *testing.T) {
			if got := models(rows(t, b)); !slices.Equal(got, tpsOrder) {
				t.Errorf("order %v, want %v", got, tpsOrder)
			}
			if s := eval[string](t, b, `document.querySelector('th[data-col="tps_p50"]').getAttribute('aria-sort')`); s != "descending" {
				t.Errorf("aria-sort of tokens/s p50 = %q, want descending", s)
			}
		}},
		{"draws each model's distributions on the charts", func(t *testing.T) {
			for _, chart := range []struct{ id, metric string }{{"chart-ttft", "time_to_first_token"}, {"chart-tps", "output_tokens_per_second"}} {
				drawn := eval[[]string](t, b, `[...document.querySelectorAll('#`+chart.id+` g[data-model]')].filter(g => g.querySelector('rect.box')).map(g => g.dataset.model)`)
				var want []string
				for _, m := range tpsOrder {
					i := slices.IndexFunc(fixture.Rows, func(r statsRow) bool { return rowName(r) == m })
					if _, ok := fixture.Rows[i].quantile(chart.metric, "p50"); ok {
						want = append(want, fixture.Rows[i].Model)
					}
				}
				if !slices.Equal(drawn, want) {
					t.Errorf("%s draws %v, want %v (in the table's order)", chart.id, drawn, want)
				}
			}
		}},
		{"draws each model's p50 and p95 over time, a gap where a slice has none", func(t *testing.T) {
			if !eval[bool](t, b, `document.querySelector('#series-tps .nodata') !== null`) {
				t.Error("the over-time chart does not say it has no data before any series")
			}
			withSeries := fixture.clone()
			start := time.Date(2026, 12, 2, 14, 55, 0, 0, time.UTC)
			for _, i := range []int{0, 2} {
				r := &withSeries.Rows[i]
				for j := range 10 {
					tps, ttft := 100.0+float64(10*j*i), 0.2+0.01*float64(j)
					p := statsPoint{Start: start.Add(time.Duration(j) * 30 * time.Second).Format(time.RFC3339), Seconds: 30, Requests: 5,
						Metrics: map[string]statsMetric{
							"output_tokens_per_second": {Unit: "{token}/s", Count: 5, P50: &tps, P95: new(tps * 1.2)},
							"time_to_first_token":      {Unit: "s", Count: 5, P50: &ttft, P95: new(ttft * 1.5)},
						}}
					if i == 0 && j == 4 {
						p.Requests, p.Metrics = 0, map[string]statsMetric{}
					}
					r.Series = append(r.Series, p)
				}
			}
			api.serve(withSeries)
			b.waitFor(t, "the series lines", `document.querySelectorAll('#series-tps g[data-quantile]').length === 4`, 10*time.Second)
			for _, chart := range []string{"series-tps", "series-ttft"} {
				got := eval[[]map[string]any](t, b, `[...document.querySelectorAll('#`+chart+` g[data-quantile]')].map(g => ({model: g.dataset.model, q: g.dataset.quantile, moves: (g.querySelector('path').getAttribute('d').match(/M/g) || []).length, points: g.querySelectorAll('circle').length, dashed: getComputedStyle(g.querySelector('path')).strokeDasharray !== 'none', label: g.querySelector('text.series-label').textContent}))`)
				want := map[string]struct {
					moves, points float64
				}{
					// The first model's slice 4 is empty: two runs of points.
					withSeries.Rows[0].Model: {2, 9},
					withSeries.Rows[2].Model: {1, 10},
				}
				if len(got) != 4 {
					t.Fatalf("%s: %d lines, want p50 and p95 of two models: %v", chart, len(got), got)
				}
				for _, g := range got {
					w := want[g["model"].(string)]
					if g["moves"].(float64) != w.moves || g["points"].(float64) != w.points {
						t.Errorf("%s %v %v: %v runs of %v points, want %v of %v", chart, g["model"], g["q"], g["moves"], g["points"], w.moves, w.points)
					}
					if dashed := g["dashed"].(bool); dashed != (g["q"] == "p95") {
						t.Errorf("%s %v %v: dashed %v; p95 is dashed and p50 solid, so the quantile does not rest on colour", chart, g["model"], g["q"], dashed)
					}
					if label := g["label"].(string); !strings.HasPrefix(label, g["q"].(string)+" "+g["model"].(string)) {
						t.Errorf("%s: line label %q does not name its quantile and model", chart, label)
					}
				}
			}
			if os.Getenv("TOKENTAP_ARTIFACTS") != "" {
				b.Screenshot(t, "page-series.png")
			}
			api.serve(fixture)
			b.waitFor(t, "the fixture again", `document.querySelector('#series-tps .nodata') !== null`, 10*time.Second)
		}},
		{"draws each model's speed by requests in flight", func(t *testing.T) {
			loaded := withInflight(fixture)
			api.serve(loaded)
			b.waitFor(t, "the in-flight lines", `document.querySelectorAll('#inflight-tps g[data-quantile]').length === 4`, 10*time.Second)
			got := eval[[]map[string]any](t, b, `[...document.querySelectorAll('#inflight-tps g[data-quantile]')].map(g => ({model: g.dataset.model, q: g.dataset.quantile, points: g.querySelectorAll('circle').length, ys: [...g.querySelectorAll('circle')].map(c => +c.getAttribute('cy'))}))`)
			wantPoints := map[string]float64{loaded.Rows[0].Model: 3, loaded.Rows[1].Model: 2}
			for _, g := range got {
				if g["points"].(float64) != wantPoints[g["model"].(string)] {
					t.Errorf("%v %v: %v points, want %v", g["model"], g["q"], g["points"], wantPoints[g["model"].(string)])
				}
				// Slower under load: each point lower on the chart (a larger y).
				ys := g["ys"].([]any)
				for i := 1; i < len(ys); i++ {
					if ys[i].(float64) <= ys[i-1].(float64) {
						t.Errorf("%v %v: points %v do not fall with load as the data does", g["model"], g["q"], ys)
					}
				}
			}
			axis := eval[[]string](t, b, `[...document.querySelectorAll('#inflight-tps text.axis')].map(t => t.textContent).filter(s => /^\d/.test(s) && !/tok/.test(s))`)
			if want := []string{"0", "1", "2–3", "4–7", "64+"}; !slices.Equal(axis[len(axis)-4:], want[1:]) {
				t.Errorf("in-flight axis %v, want the buckets %v", axis, want[1:])
			}
			if os.Getenv("TOKENTAP_ARTIFACTS") != "" {
				eval[bool](t, b, `(document.getElementById('series-title').scrollIntoView(), true)`)
				b.Screenshot(t, "page-inflight.png")
				eval[bool](t, b, `(window.scrollTo(0, 0), true)`)
			}
			api.serve(fixture)
			b.waitFor(t, "the fixture again", `document.querySelector('#inflight-tps .nodata') !== null`, 10*time.Second)
		}},
		{"in flight now: listed while requests run, the stalled marked, hidden when none", func(t *testing.T) {
			if !eval[bool](t, b, `document.getElementById('live').hidden`) {
				t.Error("the in-flight table shows with nothing in flight")
			}
			running := fixture.clone()
			running.Live = []statsLive{
				{Provider: "anthropic", Model: "claude-sonnet-4-5", InFlight: 2, Receiving: 2},
				{Provider: "openai", Model: "gpt-4o", InFlight: 5, Waiting: 1, Receiving: 3, Stalled: 1},
				{Provider: "openai", Model: "gpt-4.1", InFlight: 0}, // ended a moment ago
			}
			api.serve(running)
			b.waitFor(t, "the in-flight table", `!document.getElementById('live').hidden && document.querySelectorAll('#live-table tbody tr').length === 2`, 10*time.Second)
			type liveRow struct {
				Model   string            `json:"model"`
				Stalled bool              `json:"stalled"`
				Cells   map[string]string `json:"cells"`
			}
			got := eval[[]liveRow](t, b, `[...document.querySelectorAll('#live-table tbody tr')].map(tr => ({model: tr.dataset.model, stalled: tr.classList.contains('stalled'), cells: Object.fromEntries([...tr.children].map(c => [c.dataset.col, c.textContent]))}))`)
			want := []liveRow{
				{Model: "claude-sonnet-4-5", Cells: map[string]string{"provider": "anthropic", "model": "claude-sonnet-4-5", "in_flight": "2", "waiting": "0", "receiving": "2", "stalled": "0"}},
				{Model: "gpt-4o", Stalled: true, Cells: map[string]string{"provider": "openai", "model": "gpt-4o", "in_flight": "5", "waiting": "1", "receiving": "3", "stalled": "1"}},
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("in-flight rows:\n got %+v\nwant %+v", got, want)
			}
			if os.Getenv("TOKENTAP_ARTIFACTS") != "" {
				b.Screenshot(t, "page-live.png")
			}
			api.serve(fixture)
			b.waitFor(t, "the in-flight table hidden again", `document.getElementById('live').hidden`, 10*time.Second)
		}},
		{"clicking a heading sorts by that column", func(t *testing.T) {
			clicks := []struct {
				col  string
				want []string
				aria string
			}{
				{"ttft_p50", orderBy(fixture.Rows, byQuantile("time_to_first_token", "p50"), true), "descending"},
				{"ttft_p50", orderBy(fixture.Rows, byQuantile("time_to_first_token", "p50"), false), "ascending"},
				{"requests", orderBy(fixture.Rows, func(r statsRow) (float64, bool) { return float64(r.Requests), true }, true), "descending"},
				{"provider", orderBy(fixture.Rows, func(statsRow) (float64, bool) { return 0, true }, false), "ascending"},
				{"tps_p50", tpsOrder, "descending"},
			}
			for _, c := range clicks {
				b.do(t, "clicking "+c.col, 10*time.Second, chromedp.Click(chromedp.CSS(`button[data-col="`+c.col+`"]`)))
				if got := models(rows(t, b)); !slices.Equal(got, c.want) {
					t.Errorf("after clicking %s: %v, want %v", c.col, got, c.want)
				}
				if s := eval[string](t, b, `document.querySelector('th[data-col="`+c.col+`"]').getAttribute('aria-sort')`); s != c.aria {
					t.Errorf("after clicking %s: aria-sort %q, want %q", c.col, s, c.aria)
				}
			}
		}},
		{"the window selector asks the API for that window", func(t *testing.T) {
			for _, w := range []struct{ window, words string }{{"1h", "last hour"}, {"24h", "last 24 hours"}, {"1m", "last minute"}, {"5m", "last 5 minutes"}} {
				b.do(t, "choosing "+w.window, 10*time.Second, chromedp.Click(chromedp.CSS(`input[name="window"][value="`+w.window+`"]`)))
				b.waitFor(t, "the heading for "+w.window, `document.getElementById('table-title').textContent.endsWith(`+jsString(w.words)+`)`, 10*time.Second)
				if got := api.lastWindow(); got != w.window {
					t.Errorf("the page asked for window %q, want %q", got, w.window)
				}
				if got := eval[string](t, b, `new URLSearchParams(location.search).get('window')`); got != w.window {
					t.Errorf("the address says window %q, want %q (so a reload keeps it)", got, w.window)
				}
			}
		}},
		{"a refresh shows new data without reloading the page", func(t *testing.T) {
			eval[bool](t, b, `window.tokentapTestMarker = true`)
			api.serve(refreshed)
			b.waitFor(t, "the new model", `!!document.querySelector('#comparison tbody tr[data-model="gpt-5-nano"]')`, 10*time.Second)
			if !eval[bool](t, b, `window.tokentapTestMarker === true`) {
				t.Error("the page reloaded instead of refreshing its data")
			}
			got := rows(t, b)
			if want := orderBy(refreshed.Rows, byQuantile("output_tokens_per_second", "p50"), true); !slices.Equal(models(got), want) {
				t.Errorf("order %v, want %v", models(got), want)
			}
			i := slices.IndexFunc(got, func(r renderedRow) bool { return r.Model == refreshed.Rows[2].Model })
			if i < 0 || got[i].Cells["requests"].Value != "150" {
				t.Errorf("requests of %s not refreshed: %+v", refreshed.Rows[2].Model, got)
			}
			if os.Getenv("TOKENTAP_ARTIFACTS") != "" {
				b.Screenshot(t, "page-fixture.png")
			}
		}},
		{"an API error shows a message and keeps the last rows, marked stale", func(t *testing.T) {
			api.fail(http.StatusInternalServerError, `{"error":"stats store unavailable"}`)
			b.waitFor(t, "the error state", `document.body.dataset.state === 'error'`, 10*time.Second)
			msg := eval[map[string]any](t, b, `(m => ({text: m.textContent, hidden: m.hidden, role: m.getAttribute('role'), kind: m.dataset.kind}))(document.getElementById('message'))`)
			text, _ := msg["text"].(string)
			for _, want := range []string{"HTTP 500", "stats store unavailable", "Retrying"} {
				if !strings.Contains(text, want) {
					t.Errorf("message %q does not say %q", text, want)
				}
			}
			if msg["hidden"] != false || msg["role"] != "alert" || msg["kind"] != "error" {
				t.Errorf("message %+v: want shown, role alert, kind error", msg)
			}
			if n := len(rows(t, b)); n != len(refreshed.Rows) {
				t.Errorf("%d rows left, want the last %d", n, len(refreshed.Rows))
			}
			if !eval[bool](t, b, `document.getElementById('comparison').classList.contains('stale')`) {
				t.Error("the old rows are not marked stale")
			}
		}},
		{"recovers when the API answers again", func(t *testing.T) {
			api.serve(refreshed)
			b.waitFor(t, "the ok state", `document.body.dataset.state === 'ok'`, 10*time.Second)
			if !eval[bool](t, b, `document.getElementById('message').hidden && !document.getElementById('comparison').classList.contains('stale')`) {
				t.Error("the error message or the stale mark stayed")
			}
		}},
		{"a body that is not stats JSON is an error", func(t *testing.T) {
			api.fail(http.StatusOK, "<html>a proxy's error page</html>")
			b.waitFor(t, "the not-JSON message", `document.getElementById('message').textContent.includes('not JSON')`, 10*time.Second)
		}},
		{"a newer stats version is named, not misread", func(t *testing.T) {
			api.fail(http.StatusOK, `{"version":2,"rows":[]}`)
			b.waitFor(t, "the version message", `document.getElementById('message').textContent.includes('version 2')`, 10*time.Second)
		}},
		{"no traffic yet says so", func(t *testing.T) {
			empty := fixture.clone()
			empty.Rows = []statsRow{}
			api.serve(empty)
			b.waitFor(t, "the empty state", `document.body.dataset.state === 'empty'`, 10*time.Second)
			text := eval[string](t, b, `document.getElementById('message').textContent`)
			if !strings.Contains(text, "No requests finished in the last 5 minutes") {
				t.Errorf("message %q does not say there is no traffic", text)
			}
			if n := len(rows(t, b)); n != 0 {
				t.Errorf("%d rows, want none", n)
			}
			if !eval[bool](t, b, `document.querySelector('#chart-tps .nodata') !== null`) {
				t.Error("the tokens/s chart does not say it has no data")
			}
		}},
	}
	// The comparison's steps run on the fixture in the 5m window, before
	// the steps that sort and change the window.
	at := slices.IndexFunc(steps, func(s pageStep) bool { return s.name == "clicking a heading sorts by that column" })
	steps = slices.Insert(steps, at, compareSteps(t, b, api)...)
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			break // the later steps build on this one
		}
	}
	b.CheckClean(t)
	guard.check(t)
}

// withInflight is d with a speed by in-flight level on its first two rows,
// falling as the level rises: three buckets on the first, two (1 and 64+)
// on the second.
func withInflight(d statsDoc) statsDoc {
	c := d.clone()
	bucket := func(lo, hi, n int64, tps, ttft float64) statsInflight {
		return statsInflight{InflightMin: lo, InflightMax: hi, Requests: n, Metrics: map[string]statsMetric{
			"output_tokens_per_second": {Unit: "{token}/s", Count: n, P50: &tps, P95: new(tps * 1.1)},
			"time_to_first_token":      {Unit: "s", Count: n, P50: &ttft, P95: new(ttft * 1.3)},
		}}
	}
	c.Rows[0].ByInflight = []statsInflight{bucket(1, 1, 20, 150, 0.3), bucket(2, 3, 30, 120, 0.4), bucket(4, 7, 10, 90, 0.8)}
	c.Rows[1].ByInflight = []statsInflight{bucket(1, 1, 50, 100, 0.2), bucket(64, 0, 5, 30, 3)}
	return c
}
