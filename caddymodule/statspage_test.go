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

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/tokentap/tokentap/internal/stats"
	"github.com/tokentap/tokentap/internal/web"
)

// TestStatsPageOnASite serves the stats and the page from an ordinary site,
// and opens the page the way a browser does for a typed address (which the
// admin API refuses).
func TestStatsPageOnASite(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Caddy")
	}
	tester := caddytest.NewTester(t)
	tester.InitServer(`
	{
		admin localhost:2999
		http_port 9085
	}
	http://127.0.0.1:9085 {
		handle_path /tokentap/* {
			tokentap_stats
		}
	}`, "caddyfile")

	tests := []struct {
		name, method, path string
		header             map[string]string
		wantStatus         int
		wantType, wantBody string
	}{
		{"page from a typed address", "GET", "/tokentap/", map[string]string{"Sec-Fetch-Mode": "navigate", "Sec-Fetch-Site": "none"}, 200, "text/html", "<table"},
		{"page script", "GET", "/tokentap/page.js", nil, 200, "javascript", ""},
		{"stats", "GET", "/tokentap/stats?window=1m", nil, 200, "application/json", `"version":1`},
		{"sketches", "GET", "/tokentap/stats/sketches?window=1h", nil, 200, "application/json", `"version"`},
		{"bad window", "GET", "/tokentap/stats?window=2m", nil, 400, "", ""},
		{"compare, routed", "GET", "/tokentap/stats/compare?a=x&b=y&window=1m", nil, 400, "", ""},
		{"wrong method", "POST", "/tokentap/stats", nil, 405, "", ""},
		{"unknown asset", "GET", "/tokentap/nope.js", nil, 404, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, "http://127.0.0.1:9085"+tt.path, nil)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, tt.wantType) {
				t.Errorf("Content-Type %q, want %q", ct, tt.wantType)
			}
			if !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("body lacks %q: %.200s", tt.wantBody, body)
			}
			if tt.wantType == "application/json" && !json.Valid(body) {
				t.Errorf("invalid JSON: %.200s", body)
			}
		})
	}
}

func TestStatsPageCaddyfile(t *testing.T) {
	for _, tt := range []struct {
		name, input, wantErr string
	}{
		{"bare", "tokentap_stats", ""},
		{"argument", "tokentap_stats x", "wrong argument count"},
		{"block", "tokentap_stats {\n x\n}", "wrong argument count"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var s StatsPage
			err := s.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input))
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestStatsPageRoutes: below its prefix the page handler answers the admin
// API's JSON routes, the comparison included (the page fetches it by a
// relative URL), and the page for everything else.
func TestStatsPageRoutes(t *testing.T) {
	now := time.Now()
	s := stats.NewStore(stats.Options{})
	compareTraffic(now, s, s, stats.NewStore(stats.Options{}))
	page := &StatsPage{api: AdminAPI{store: s, page: web.Handler(), now: func() time.Time { return now }}}
	tests := []struct {
		name, target string
		status       int
		body         string
	}{
		{"stats", "/stats?window=5m", 200, `"model":"heavy"`},
		{"sketches", "/stats/sketches?window=5m", 200, `"version"`},
		{"compare", "/stats/compare?a=light&b=heavy&window=5m&cells=true", 200, `"ratio":"b/a"`},
		{"compare without strata", "/stats/compare?a=light&b=heavy&window=1m", 400, "keeps no strata"},
		{"compare, no such row", "/stats/compare?a=light&b=other", 400, "no row"},
		{"the page", "/", 200, "<table"},
		{"the script", "/page.js", 200, "use strict"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, tt.target, nil)
			err := page.ServeHTTP(w, r, nil)
			status, body := w.Code, w.Body.String()
			if err != nil {
				var he caddyhttp.HandlerError
				if !errors.As(err, &he) {
					t.Fatalf("error %v is not a caddyhttp.HandlerError", err)
				}
				status, body = he.StatusCode, he.Err.Error()
			}
			if status != tt.status || !strings.Contains(body, tt.body) {
				t.Errorf("status %d, body %.300s; want %d with %q", status, body, tt.status, tt.body)
			}
		})
	}
}
