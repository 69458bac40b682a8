package loadgen

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// result is a completed request of known timing: first token at ttft, then
// n-1 more one gap apart.
func result(model string, ttft, gap time.Duration, n int) *Result {
	r := &Result{Model: model, Start: time.Unix(100, 0), Status: 200, ContentEvents: n, OutputTokens: n, UsageReported: true,
		FirstToken: ttft, LastToken: ttft + time.Duration(n-1)*gap, End: ttft + time.Duration(n)*gap}
	for range n - 1 {
		r.Gaps = append(r.Gaps, gap)
	}
	return r
}

func TestAggregate(t *testing.T) {
	cfg := &Config{API: OpenAI, URL: "http://x/v1/chat/completions", Models: []string{"b", "a", "b"}, Concurrency: 4}
	agg := newAggregator(cfg)
	// Model a: TTFT 100..109 ms, 10 ms gaps (100 tok/s), 11 tokens each.
	for i := range 10 {
		agg.add(result("a", time.Duration(100+i)*time.Millisecond, 10*time.Millisecond, 11))
	}
	// Model b: two fast requests and two failures.
	agg.add(result("b", 20*time.Millisecond, 2*time.Millisecond, 5))
	agg.add(result("b", 20*time.Millisecond, 2*time.Millisecond, 5))
	agg.add(&Result{Model: "b", Start: time.Unix(100, 0), Status: 429, ErrorKind: "http_429"})
	agg.add(&Result{Model: "b", Start: time.Unix(100, 0), ErrorKind: ErrTruncated, ContentEvents: 3, FirstToken: time.Millisecond})
	rep := agg.report(time.Unix(100, 0), time.Unix(200, 0), 0)

	if len(rep.Models) != 2 || rep.Models[0].Model != "b" || rep.Models[1].Model != "a" {
		t.Fatalf("models %+v, want b then a, once each", rep.Models)
	}
	// The last request ended at 109 ms + 11 gaps of 10 ms.
	if want := (219 * time.Millisecond).Seconds(); math.Abs(rep.Elapsed-want) > 1e-9 {
		t.Errorf("elapsed %v s, want %v (the last end, not the report's time)", rep.Elapsed, want)
	}
	a, b := rep.Models[1], rep.Models[0]
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > relativeAccuracy*want+1e-12 {
			t.Errorf("%s = %v, want %v within %.1f%%", name, got, want, relativeAccuracy*100)
		}
	}
	if a.Requests != 10 || a.Succeeded != 10 || a.OutputTokens != 110 || a.UsageReported != 10 {
		t.Errorf("a: %+v", a)
	}
	near("a ttft p50", a.TimeToFirstToken.P50, 0.104)
	near("a ttft p99", a.TimeToFirstToken.P99, 0.108)
	near("a rate p50", a.OutputTokensPerSecond.P50, 100)
	near("a itl p95", a.InterTokenLatency.P95, 0.010)
	if a.InterTokenLatency.Count != 100 {
		t.Errorf("a: %d gaps, want 100", a.InterTokenLatency.Count)
	}
	near("a throughput", a.Throughput, 110/0.219)
	if b.Requests != 4 || b.Succeeded != 2 || b.Failed != 2 || b.Errors["http_429"] != 1 || b.Errors[ErrTruncated] != 1 {
		t.Errorf("b: %+v", b)
	}
	// The truncated request's first token is not a completed request's.
	if b.TimeToFirstToken.Count != 2 {
		t.Errorf("b: %d TTFT samples, want the 2 completed requests'", b.TimeToFirstToken.Count)
	}
	near("b rate p50", b.OutputTokensPerSecond.P50, 500)
	if rep.Total.Requests != 14 || rep.Total.Succeeded != 12 || rep.Total.OutputTokens != 120 {
		t.Errorf("total %+v", rep.Total)
	}

	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	out := table.String()
	for _, want := range []string{
		"openai http://x/v1/chat/completions, concurrency 4, 14 requests in 0.2 s",
		"TTFT ms p50", "ITL ms p50",
		"failed: b: 1 http_429, b: 1 truncated",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 15 {
			rows[f[0]] = f
		}
	}
	if r := rows["a"]; r == nil || r[1] != "10" || r[2] != "0" || r[3] != "110" || r[8] != "100.0" {
		t.Errorf("row a %q in:\n%s", r, out)
	}
	if rows["all"] == nil || rows["all"][1] != "12" {
		t.Errorf("no total row, or a wrong one, in:\n%s", out)
	}

	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"time_to_first_token_seconds":{"count":10,`, `"output_tokens_per_second":`, `"inter_token_latency_seconds":`, `"errors":{"http_429":1,"truncated":1}`, `"elapsed_seconds":0.219`} {
		if !strings.Contains(string(js), key) {
			t.Errorf("JSON lacks %s: %s", key, js)
		}
	}
}

func TestTableWithoutSamples(t *testing.T) {
	cfg := &Config{API: Anthropic, URL: "http://x/v1/messages", Models: []string{"m"}, Concurrency: 2, Rate: 5}
	agg := newAggregator(cfg)
	agg.add(&Result{Model: "m", Start: time.Unix(100, 0), ErrorKind: ErrTransport})
	var b strings.Builder
	if err := agg.report(time.Unix(100, 0), time.Unix(101, 0), 3).WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"5 requests/s, at most 2 in flight", "3 started late", "failed: m: 1 transport"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 15 && f[0] == "m" {
			if f[5] != "-" || f[11] != "-" || f[14] != "-" {
				t.Errorf("a model without samples shows figures: %q", f)
			}
			return
		}
	}
	t.Errorf("no row for m:\n%s", out)
}
