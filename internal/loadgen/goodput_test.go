package loadgen

import (
	"math"
	"strings"
	"testing"
	"time"
)

// done is a completed request: first token at ttft, then n-1 more tokens
// over decode, ending at the last token.
func done(model string, ttft, decode time.Duration, n int) *Result {
	return &Result{Model: model, Start: time.Unix(100, 0), Status: 200, OutputTokens: n, ContentEvents: n,
		FirstToken: ttft, LastToken: ttft + decode, End: ttft + decode}
}

// TestGoodput: each request is held to the SLO (a failure misses it, a
// one-token answer has no rate to judge), the model's attainment is over
// every request sent, and token goodput is the met requests' tokens over
// the run's time; the e2e rate counts the wait for the first token.
func TestGoodput(t *testing.T) {
	slo, err := ParseSLO("ttft=500ms,tps=30")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{URL: "http://x/v1/chat/completions", Models: []string{"m"}, Concurrency: 1, SLO: slo}
	agg := newAggregator(cfg)
	for _, r := range []*Result{
		done("m", 200*time.Millisecond, time.Second, 41),                // 40 tok/s after the first: met, 41 tokens
		done("m", 800*time.Millisecond, time.Second, 41),                // late first token: missed
		done("m", 200*time.Millisecond, 2*time.Second, 41),              // 20 tok/s: missed
		done("m", 100*time.Millisecond, 0, 1),                           // one token, no rate: met, 1 token
		{Model: "m", Start: time.Unix(100, 0), ErrorKind: ErrTransport}, // failed: missed
	} {
		agg.add(r)
	}
	rep := agg.report(time.Unix(100, 0), time.Unix(110, 0), 0)
	g := rep.Models[0].Goodput
	// The run's time is from its start to the last end, 2.2 s.
	if g == nil || g.Met != 2 || g.Attainment != 0.4 || math.Abs(g.TokenGoodput-42.0/2.2) > 1e-9 {
		t.Errorf("goodput %+v, want 2 met of 5, 42 tokens in 2.2 s", g)
	}
	// e2e of the first request: 41 tokens in 1.2 s.
	if e2e := rep.Models[0].OutputTokensPerSecondE2E; e2e.Count != 4 || math.Abs(e2e.P50-41/1.2)/(41/1.2) > 0.5 {
		t.Errorf("e2e tok/s %+v", e2e)
	}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SLO met", "goodput tok/s", "40.0%", "goodput: the requests that met the SLO (ttft <= 500ms, tok/s >= 30)", "e2e tok/s: per request, tokens over the whole request"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}

	for _, bad := range []struct{ in, want string }{
		{"ttft=fast", `--slo ttft "fast"`},
		{"tps=-1", `--slo tps "-1"`},
		{"itl=5ms", `unknown threshold "itl"`},
		{"500ms", "want ttft=500ms,tps=30"},
	} {
		if _, err := ParseSLO(bad.in); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseSLO(%q): %v, want %q", bad.in, err, bad.want)
		}
	}
}

// TestClientCPU: the share is CPU time over the run's time on every core Go
// uses, and the table warns past clientCPUWarn.
func TestClientCPU(t *testing.T) {
	rep := &Report{Concurrency: 1}
	rep.setClientCPU(3*time.Second, time.Second)
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if rep.ClientCPUSeconds != 3 || rep.ClientCPUShare <= 0 {
		t.Fatalf("cpu %v s, share %v", rep.ClientCPUSeconds, rep.ClientCPUShare)
	}
	warned := strings.Contains(b.String(), "warning: the load generator used")
	if warned != (rep.ClientCPUShare > clientCPUWarn) {
		t.Errorf("share %.2f, warned %v:\n%s", rep.ClientCPUShare, warned, b.String())
	}
	if _, ok := processCPU(); !ok {
		t.Error("no process CPU time on this platform")
	}
}
