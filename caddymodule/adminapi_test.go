package caddymodule

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/stats"
	"github.com/tokentap/tokentap/internal/web"
)

// newTestAdminAPI is the admin API over a store of its own, at a fixed
// time, as Provision would make it over the process's store.
func newTestAdminAPI(s *stats.Store, now time.Time) *AdminAPI {
	return &AdminAPI{store: s, page: http.StripPrefix("/tokentap", web.Handler()), now: func() time.Time { return now }}
}

// route finds the handler Caddy's admin mux would pick for path.
func (a *AdminAPI) route(path string) caddy.AdminHandler {
	mux := http.NewServeMux()
	handlers := map[string]caddy.AdminHandler{}
	for _, r := range a.Routes() {
		mux.Handle(r.Pattern, http.NotFoundHandler())
		handlers[r.Pattern] = r.Handler
	}
	_, pattern := mux.Handler(httptest.NewRequest(http.MethodGet, path, nil))
	return handlers[pattern]
}

// TestAdminAPIRoutes: each route answers its method with its document, a
// bad window with 400 and a message naming the good ones, another method
// with 405 and Allow.
func TestAdminAPIRoutes(t *testing.T) {
	now := time.Now()
	s := stats.NewStore(stats.Options{})
	k := stats.Key{Provider: "openai", Model: "gpt-4o-mini"}
	smp := stats.SampleOf(&meter.Measurement{FirstToken: 200 * time.Millisecond, End: time.Second, Outcome: meter.OutcomeCompleted})
	s.Record(&k, &smp, now)
	a := newTestAdminAPI(s, now)

	tests := []struct {
		name       string
		method     string
		target     string
		wantStatus int
		wantType   string
		wantBody   string
		wantAllow  string
	}{
		{"stats, default window", "GET", "/tokentap/stats", 200, "application/json", `"window":"5m"`, ""},
		{"stats, 1h", "GET", "/tokentap/stats?window=1h", 200, "application/json", `"window_seconds":3600`, ""},
		{"stats has the row", "GET", "/tokentap/stats?window=1m", 200, "application/json", `"model":"gpt-4o-mini"`, ""},
		{"stats, bad window", "GET", "/tokentap/stats?window=2m", 400, "", `window "2m": use 1m, 5m, 1h or 24h`, ""},
		{"stats, POST", "POST", "/tokentap/stats", 405, "", "method POST not allowed", "GET"},
		{"stats, 24h", "GET", "/tokentap/stats?window=24h", 200, "application/json", `"window_seconds":86400`, ""},
		{"stats with series", "GET", "/tokentap/stats?window=1m&series=true", 200, "application/json", `"series":[{"start":`, ""},
		{"stats without series", "GET", "/tokentap/stats?window=1m&series=false", 200, "application/json", `"model":"gpt-4o-mini"`, ""},
		{"stats, bad series", "GET", "/tokentap/stats?series=yes", 400, "", `series "yes": use true or false`, ""},
		{"sketches with series", "GET", "/tokentap/stats/sketches?window=1m&series=1", 200, "application/json", `"series":[{"start":`, ""},
		{"sketches", "GET", "/tokentap/stats/sketches?window=5m", 200, "application/json", `"relative_accuracy":0.01`, ""},
		{"sketches, bad window", "GET", "/tokentap/stats/sketches?window=week", 400, "", `window "week"`, ""},
		{"sketches, DELETE", "DELETE", "/tokentap/stats/sketches", 405, "", "method DELETE not allowed", "GET"},
		{"page", "GET", "/tokentap/", 200, "text/html; charset=utf-8", "<html", ""},
		{"page, HEAD", "HEAD", "/tokentap/", 200, "text/html; charset=utf-8", "", ""},
		{"page, POST", "POST", "/tokentap/", 405, "", "method POST not allowed", "GET, HEAD"},
		{"page asset missing", "GET", "/tokentap/no-such-file.js", 404, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(tt.method, tt.target, nil)
			err := a.route(r.URL.Path).ServeHTTP(w, r)
			status, body := w.Code, w.Body.String()
			if err != nil {
				// Caddy's admin server answers an APIError with its
				// status and {"error": message}.
				var apiErr caddy.APIError
				if !errors.As(err, &apiErr) {
					t.Fatalf("error %v is not an APIError", err)
				}
				status, body = apiErr.HTTPStatus, apiErr.Err.Error()
			}
			if status != tt.wantStatus || !strings.Contains(body, tt.wantBody) {
				t.Errorf("%d %q, want %d with %q", status, body, tt.wantStatus, tt.wantBody)
			}
			if tt.wantType != "" && w.Header().Get("Content-Type") != tt.wantType {
				t.Errorf("Content-Type %q, want %q", w.Header().Get("Content-Type"), tt.wantType)
			}
			if w.Header().Get("Allow") != tt.wantAllow {
				t.Errorf("Allow %q, want %q", w.Header().Get("Allow"), tt.wantAllow)
			}
			if tt.wantType == "application/json" && w.Header().Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q: a sliding window must not be cached", w.Header().Get("Cache-Control"))
			}
		})
	}
}

// TestAdminAPIModule: the module is registered under the admin.api
// namespace, which Caddy loads without configuration, and Provision
// attaches it to the process's store.
func TestAdminAPIModule(t *testing.T) {
	mi, err := caddy.GetModule("admin.api.tokentap")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range caddy.GetModules("admin.api") {
		found = found || m.ID == "admin.api.tokentap"
	}
	if !found {
		t.Error("admin.api.tokentap is not among the admin.api modules Caddy loads")
	}
	a, ok := mi.New().(*AdminAPI)
	if !ok {
		t.Fatalf("New returns %T", mi.New())
	}
	if err := a.Provision(caddy.Context{}); err != nil || a.store != liveStats {
		t.Fatalf("Provision: %v, store is the process's: %v", err, a.store == liveStats)
	}
}

// TestRecordStats: a measured exchange lands in the live stats, under its
// provider, its response model (else its request model) and its labels,
// and recording into an existing row allocates nothing.
func TestRecordStats(t *testing.T) {
	hs := newHarness(t, &Handler{Labels: map[string]string{"team": "{http.request.header.X-Team}"}},
		streamUpstream(fixture(t, "chat_usage.sse"), nil))
	req, _ := http.NewRequest(http.MethodPost, hs.srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"stats-test-model","stream":true}`))
	req.Header.Set("X-Team", "stats-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	span := hs.span(t)
	model := attrs(span)["gen_ai.response.model"].AsString()
	if model == "" {
		t.Fatal("the fixture has no response model")
	}

	rep := liveStats.Aggregate(stats.Window1m, time.Now()).Report(time.Now())
	var row *stats.ReportRow
	for i := range rep.Rows {
		if r := &rep.Rows[i]; r.Model == model && r.Labels["team"] == "stats-test" {
			row = r
		}
	}
	if row == nil {
		b, _ := json.Marshal(rep)
		t.Fatalf("no row for model %s, team stats-test: %s", model, b)
	}
	if row.Provider != "openai" || row.Requests != 1 || row.Metrics.TimeToFirstToken.Count != 1 || row.Metrics.OutputTokens.Count != 1 {
		t.Errorf("row %+v", row)
	}

	t.Run("request model when the response has none", func(t *testing.T) {
		f := &sink.Result{M: &meter.Measurement{Request: meter.Request{Model: "stats-request-only"}, End: time.Second}, End: time.Now(), Provider: "openai"}
		hs.h.cfg.Rows.Record(f)
		a := liveStats.Aggregate(stats.Window1m, time.Now())
		for _, r := range a.Rows() {
			if r.Key.Model == "stats-request-only" {
				return
			}
		}
		t.Error("no row under the request's model")
	})

	t.Run("no allocation into an existing row", func(t *testing.T) {
		f := &sink.Result{
			M:        &meter.Measurement{ResponseModel: "stats-alloc", FirstToken: time.Millisecond, LastToken: time.Second, End: time.Second, Usage: meter.Usage{OutputTokens: 10, InputTokens: 3, Source: meter.UsageReported}},
			End:      time.Now(),
			Provider: "openai",
			Labels:   []sink.Label{{Name: "app", Value: "a"}, {Name: "team", Value: "t"}},
		}
		rows := hs.h.cfg.Rows
		rows.Record(f)
		if allocs := testing.AllocsPerRun(100, func() { rows.Record(f) }); allocs != 0 {
			t.Errorf("%v allocations per exchange", allocs)
		}
	})
}
