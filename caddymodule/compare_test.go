package caddymodule

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokentap/tokentap/internal/simulator/speed"
	"github.com/tokentap/tokentap/internal/stats"
)

// compareTraffic records the same requests into a (even ones), b (odd
// ones) and all (every one), at now: two models of one speed curve,
// "light" at 1 to 7 in flight with prompts under 2k tokens, "heavy" at 2
// to 15 with prompts from 512, so that they share some cells.
func compareTraffic(now time.Time, a, b, all *stats.Store) {
	curve := speed.Curve{TimeToFirstToken: 200 * time.Millisecond, TokensPerSecond: 60, BatchSlowdown: 0.08, PrefillTokensPerSecond: 5000}
	rnd := rand.New(rand.NewPCG(5, 6))
	for i := range 3000 {
		model, level, tokens := "light", 1+rnd.IntN(7), 16+rnd.IntN(2000)
		if i%2 == 1 {
			model, level, tokens = "heavy", 2+rnd.IntN(14), 512+rnd.IntN(3500)
		}
		ttft, rate := curve.At(level, tokens)
		var smp stats.Sample
		smp.Set(stats.TimeToFirstToken, ttft.Seconds()*(0.8+0.4*rnd.Float64()))
		smp.Set(stats.OutputTokensPerSecond, rate*(0.8+0.4*rnd.Float64()))
		smp.Set(stats.InputTokens, float64(tokens))
		smp.Inflight = int64(level)
		for _, s := range []*stats.Store{[]*stats.Store{a, b}[i/2%2], all} {
			k := stats.Key{Provider: "openai", Model: model}
			s.Record(&k, &smp, now)
		}
	}
}

// TestStatsCompare: `tokentap stats --compare` across two instances gives
// what one instance that saw all their traffic gives, as JSON and as
// text; equal speeds compare as 1 within the interval while the naive
// ratio shows the heavy model slower; bad arguments are errors.
func TestStatsCompare(t *testing.T) {
	now := time.Now()
	a, b, all := stats.NewStore(stats.Options{}), stats.NewStore(stats.Options{}), stats.NewStore(stats.Options{})
	compareTraffic(now, a, b, all)
	addrA, addrB, addrAll := serveFakeAdmin(t, "127.0.0.1:0", a), serveFakeAdmin(t, "127.0.0.1:0", b), serveFakeAdmin(t, "127.0.0.1:0", all)

	args := []string{"--compare", "model=light", "model=heavy", "--strata"}
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			extra := []string{}
			if format == "json" {
				extra = []string{"--json"}
			}
			merged, err := runStatsCommand(t, append(append(args, extra...), "--from", addrA, "--from", addrB)...)
			if err != nil {
				t.Fatal(err)
			}
			single, err := runStatsCommand(t, append(append(args, extra...), "--address", addrAll)...)
			if err != nil {
				t.Fatal(err)
			}
			if format == "text" {
				if merged != single {
					t.Errorf("merged:\n%s\nsingle:\n%s", merged, single)
				}
				for _, want := range []string{"A: model=light (1 rows", "B/A over the last 5m", "METRIC  Q", "ttft", "tps", "By cell", "INFLIGHT  INPUT"} {
					if !strings.Contains(single, want) {
						t.Errorf("no %q in\n%s", want, single)
					}
				}
				return
			}
			var got, want stats.Comparison
			if err := json.Unmarshal([]byte(merged), &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(single), &want); err != nil {
				t.Fatal(err)
			}
			got.GeneratedAt, want.GeneratedAt = time.Time{}, time.Time{}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("merged comparison differs from one instance's:\n%s\n%s", merged, single)
			}
			for _, m := range want.Metrics {
				if m.Fair == nil || m.Fair.Low > 1 || m.Fair.High < 1 {
					t.Errorf("%s %s: fair %+v (%s), want an interval holding 1", m.Metric, m.Quantile, m.Fair, m.NotComparable)
				}
				if m.Metric == "time_to_first_token" && m.Quantile == "p50" && (m.Naive == nil || *m.Naive < 1.5) {
					t.Errorf("naive ttft p50 ratio %v, want the heavy model's load and prompts to show", m.Naive)
				}
			}
		})
	}

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"one selector", []string{"--compare", "model=light"}, "takes two arguments"},
		{"window without strata", []string{"--compare", "light", "heavy", "--window", "1m"}, "keeps no strata"},
		{"bad selector", []string{"--compare", "team=x", "heavy"}, "unknown term"},
		{"no such rows", []string{"--compare", "light", "nothing"}, "no row"},
		{"arguments without --compare", []string{"light", "heavy"}, "only --compare takes arguments"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runStatsCommand(t, append(tt.args, "--address", addrAll)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one with %q", err, tt.want)
			}
		})
	}
}

// TestAdminAPICompare: GET /tokentap/stats/compare and its errors.
func TestAdminAPICompare(t *testing.T) {
	now := time.Now()
	s := stats.NewStore(stats.Options{})
	compareTraffic(now, s, s, stats.NewStore(stats.Options{}))
	a := newTestAdminAPI(s, now)
	tests := []struct {
		name, target string
		status       int
		body         string
	}{
		{"compare", "/tokentap/stats/compare?a=light&b=heavy", 200, `"ratio":"b/a"`},
		{"1h with cells", "/tokentap/stats/compare?a=model%3Dlight&b=model%3Dheavy&window=1h&cells=true", 200, `"cells":[{"inflight_min":1`},
		{"no a", "/tokentap/stats/compare?b=heavy", 400, "a: empty selector"},
		{"bad cells", "/tokentap/stats/compare?a=light&b=heavy&cells=all", 400, `cells "all"`},
		{"window without strata", "/tokentap/stats/compare?a=light&b=heavy&window=24h", 400, "keeps no strata"},
		{"no rows", "/tokentap/stats/compare?a=light&b=other", 400, "no row"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, tt.target, nil)
			err := a.route(r.URL.Path).ServeHTTP(w, r)
			status, body := w.Code, w.Body.String()
			if err != nil {
				var apiErr caddy.APIError
				if !errors.As(err, &apiErr) {
					t.Fatalf("error %v is not an APIError", err)
				}
				status, body = apiErr.HTTPStatus, apiErr.Err.Error()
			}
			if status != tt.status || !strings.Contains(body, tt.body) {
				t.Errorf("status %d, body %s; want %d with %q", status, body, tt.status, tt.body)
			}
		})
	}
}
