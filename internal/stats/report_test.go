package stats

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"
	"time"
)

// TestReportJSON checks the JSON contract of GET /tokentap/stats that the
// page and users' scripts read: the keys, the quantiles per metric, a
// metric without points as {"unit","count":0}, labels as {} when none, the
// rates, and the rows' order.
func TestReportJSON(t *testing.T) {
	s := newTestStore(0)
	for i := 0; i < 10; i++ {
		smp := only(OutputTokensPerSecond, 40)
		smp.Set(TimeToFirstToken, 0.2)
		smp.Error, smp.Estimated = i == 0, i < 3
		smp.Abort = i == 1
		if i < 4 {
			// Four requests with a price, at 0.0125 US cents each.
			smp.Set(Cost, 0.000125)
		}
		// Eight judged against an objective, six of them met, each with
		// 150 output tokens: 900 goodput tokens in 300 s.
		smp.Set(OutputTokens, 150)
		smp.SLOJudged, smp.SLOMet = i >= 2, i >= 4
		record(s, key("openai", "b-model"), smp, time.Second)
	}
	record(s, key("openai", "a-model", "team", "search"), only(Duration, 1), time.Second)
	record(s, key("anthropic", "z-model"), only(Duration, 1), time.Second)
	now := at(2 * time.Second)
	b, err := json.Marshal(s.Aggregate(Window5m, now).Report(now))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	keysOf := func(m any) []string {
		var ks []string
		for k := range m.(map[string]any) {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return ks
	}
	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("top-level keys", keysOf(doc), []string{"generated_at", "live", "rows", "version", "window", "window_seconds"})
	check("version", doc["version"], 1.0)
	check("window", doc["window"], "5m")
	check("window_seconds", doc["window_seconds"], 300.0)
	check("generated_at", doc["generated_at"], "2026-12-02T15:00:02Z")

	rows := doc["rows"].([]any)
	var order []string
	for _, r := range rows {
		order = append(order, r.(map[string]any)["provider"].(string)+"/"+r.(map[string]any)["model"].(string))
	}
	check("row order", order, []string{"anthropic/z-model", "openai/a-model", "openai/b-model"})

	row := rows[2].(map[string]any)
	check("row keys", keysOf(row), []string{"abort_rate", "aborts", "buffered", "cost_usd", "error_rate", "errors", "estimated_share", "health", "labels", "metrics", "model", "overflow", "provider", "requests", "slo", "throttled", "throttled_rate"})
	check("slo", row["slo"], map[string]any{"requests": 8.0, "met": 6.0, "attainment": 0.75, "token_goodput": 3.0})
	if _, ok := rows[1].(map[string]any)["slo"]; ok {
		t.Error("a row no objective judged has an slo")
	}
	check("labels when none", row["labels"], map[string]any{})
	check("labels", rows[1].(map[string]any)["labels"], map[string]any{"team": "search"})
	check("overflow", row["overflow"], false)
	check("requests", row["requests"], 10.0)
	check("error_rate", row["error_rate"], 0.1)
	check("abort_rate", row["abort_rate"], 0.1)
	check("estimated_share", row["estimated_share"], 0.3)
	check("cost_usd", row["cost_usd"], 0.0005)
	check("cost_usd when unpriced", rows[1].(map[string]any)["cost_usd"], 0.0)

	metrics := row["metrics"].(map[string]any)
	check("metric names", keysOf(metrics), []string{"cost", "duration", "input_tokens", "output_tokens", "output_tokens_per_second",
		"time_per_output_token", "time_to_first_token", "time_to_first_visible_token"})
	check("throughput keys", keysOf(metrics["output_tokens_per_second"]), []string{"count", "p5", "p50", "p90", "p95", "p99", "unit"})
	check("ttft keys", keysOf(metrics["time_to_first_token"]), []string{"count", "p50", "p90", "p95", "p99", "unit"})
	check("metric without points", metrics["duration"], map[string]any{"unit": "s", "count": 0.0})
	check("units", []any{
		metrics["output_tokens_per_second"].(map[string]any)["unit"],
		metrics["input_tokens"].(map[string]any)["unit"],
		metrics["time_per_output_token"].(map[string]any)["unit"],
		metrics["cost"].(map[string]any)["unit"],
	}, []any{"{token}/s", "{token}", "s", "{USD}"})
	check("cost count", metrics["cost"].(map[string]any)["count"], 4.0)
	if p95 := metrics["cost"].(map[string]any)["p95"].(float64); p95 < 0.000125*(1-RelativeAccuracy) || p95 > 0.000125*(1+RelativeAccuracy) {
		t.Errorf("cost p95 %v, want 0.000125 within 1%%", p95)
	}
	if p50 := metrics["output_tokens_per_second"].(map[string]any)["p50"].(float64); p50 < 40*(1-RelativeAccuracy) || p50 > 40*(1+RelativeAccuracy) {
		t.Errorf("throughput p50 %v, want 40 within 1%%", p50)
	}

	// The JSON reads back into the same Report (the CLI's --json and the
	// page rely on one shape).
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(back)
	if string(b) != string(b2) {
		t.Errorf("report does not round-trip:\n%s\n%s", b, b2)
	}
}

// TestReportEmpty: no traffic gives an empty rows array, not null.
func TestReportEmpty(t *testing.T) {
	b, _ := json.Marshal(newTestStore(0).Aggregate(Window1h, at(0)).Report(origin))
	var doc struct {
		Rows []any `json:"rows"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || doc.Rows == nil || len(doc.Rows) != 0 {
		t.Errorf("empty report %s", b)
	}
}

// TestParseWindow accepts the three windows and nothing else.
func TestParseWindow(t *testing.T) {
	tests := []struct {
		in      string
		want    Window
		seconds int
		ok      bool
	}{
		{"1m", Window1m, 60, true},
		{"5m", Window5m, 300, true},
		{"1h", Window1h, 3600, true},
		{"24h", Window24h, 86400, true},
		{"1d", 0, 0, false},
		{"60s", 0, 0, false},
		{"", 0, 0, false},
		{"1H", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			w, err := ParseWindow(tt.in)
			if (err == nil) != tt.ok || (tt.ok && (w != tt.want || int(w.Duration().Seconds()) != tt.seconds || w.String() != tt.in)) {
				t.Errorf("ParseWindow(%q) = %v, %v", tt.in, w, err)
			}
		})
	}
}
