package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/simulator"
	"github.com/tokentap/tokentap/internal/stats"
	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// providerSideCaddyfile is one built tokentap in front of the simulator
// twice: directly (/sim/), with verify_usage on every request and a short
// stall threshold, and through a second reverse_proxy that holds the whole
// body before it sends a byte (/held/). The simulator limits one model to
// 5 requests a minute. Admin, proxy port, simulator address, held port,
// simulator port.
const providerSideCaddyfile = `{
	admin %[1]s
	default_bind 127.0.0.1
	skip_install_trust
}

http://:%[2]s {
	handle_path /sim/* {
		tokentap {
			stall_threshold 300ms
			verify_usage 1
		}
		reverse_proxy %[3]s
	}
	handle_path /held/* {
		tokentap
		reverse_proxy 127.0.0.1:%[4]s
	}
}

http://:%[4]s {
	reverse_proxy %[3]s {
		response_buffers unlimited
	}
}

http://:%[5]s {
	tokentap_simulator {
		output_tokens 40
		model e2e-limited {
			rate_limit_requests 5
		}
	}
}
`

// TestProviderSideThroughBinary runs the built binary and checks, on its
// stats API, its /metrics and `tokentap stats`, what tokentap reads of the
// provider's side: rate-limit headroom and throttled answers, streams that
// arrived buffered, requests in flight and stalled while they run, and the
// provider's output count checked against the tokenizer's.
func TestProviderSideThroughBinary(t *testing.T) {
	bin := testbin.Binary(t)
	admin, proxy, held, sim := testbin.FreeAddr(t), testbin.FreeAddr(t), testbin.FreeAddr(t), testbin.FreeAddr(t)
	conf := fmt.Sprintf(providerSideCaddyfile, admin, port(proxy), sim, port(held), port(sim))
	p := testbin.Start(t, testbin.Config{
		Name: "provider-side", Bin: bin, Caddyfile: conf,
		Env: append(testbin.Environ("OTEL_"), "OTEL_TRACES_EXPORTER=none"),
		AfterStop: func(out string) {
			if t.Failed() {
				t.Logf("output:\n%s", testbin.LastLines(out, 40))
			}
		},
	})
	p.WaitReady(t, 30*time.Second, "http://"+admin+"/config/")
	p.WaitListening(t, 30*time.Second, proxy, held, sim)

	// stream sends one streamed chat completion and reads it whole; it
	// returns the status.
	stream := func(route, model string, header map[string]string) int {
		t.Helper()
		body := `{"model":"` + model + `","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
		req, err := http.NewRequest("POST", "http://"+proxy+route+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, bufio.NewReader(resp.Body))
		return resp.StatusCode
	}
	report := func() *stats.Report {
		t.Helper()
		var rep stats.Report
		if err := json.Unmarshal([]byte(adminGet(t, admin, "/tokentap/stats?window=5m")), &rep); err != nil {
			t.Fatal(err)
		}
		return &rep
	}
	row := func(rep *stats.Report, model string) *stats.ReportRow {
		for i := range rep.Rows {
			if rep.Rows[i].Model == model {
				return &rep.Rows[i]
			}
		}
		return nil
	}
	// waitRow waits until model's row holds n requests: a row is filed as
	// its exchange ends, just after the client read its last byte.
	waitRow := func(model string, n int64) *stats.ReportRow {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if r := row(report(), model); r != nil && r.Requests >= n {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("the stats never counted %d requests of %s", n, model)
			}
		}
	}

	t.Run("rate limits: headroom, then throttled", func(t *testing.T) {
		var statuses []int
		for range 7 {
			statuses = append(statuses, stream("/sim", "e2e-limited", nil))
		}
		if want := []int{200, 200, 200, 200, 200, 429, 429}; fmt.Sprint(statuses) != fmt.Sprint(want) {
			t.Fatalf("statuses %v, want %v: the simulator limits e2e-limited to 5 a minute", statuses, want)
		}
		r := waitRow("e2e-limited", 7)
		if r.Throttled != 2 || r.Errors != 0 {
			t.Errorf("throttled %d, errors %d; want the two 429s throttled, not errors", r.Throttled, r.Errors)
		}
		if r.RateLimit == nil || r.RateLimit.Requests == nil || r.RateLimit.Requests.RemainingShare == nil {
			t.Fatalf("no request headroom on the row: %+v", r.RateLimit)
		}
		if got := *r.RateLimit.Requests.RemainingShare; got != 0 {
			t.Errorf("requests remaining share %v after the limit was spent, want 0", got)
		}
		if r.RateLimit.RetryAfterSeconds == nil || *r.RateLimit.RetryAfterSeconds <= 0 {
			t.Errorf("no retry-after from the throttled answer: %+v", r.RateLimit)
		}
		metrics := adminGet(t, admin, "/metrics")
		if !strings.Contains(metrics, "tokentap_ratelimit_remaining_share_ratio{") || !strings.Contains(metrics, `e2e-limited`) {
			t.Errorf("/metrics has no rate limit gauge for e2e-limited")
		}
	})

	t.Run("buffered streams: flagged behind the holding proxy only", func(t *testing.T) {
		h := map[string]string{
			simulator.HeaderTimeToFirstToken: "50ms",
			simulator.HeaderTokensPerSecond:  "200",
		}
		for range 3 {
			stream("/held", "e2e-held", h)
			stream("/sim", "e2e-direct", h)
		}
		if r := waitRow("e2e-held", 3); r.Buffered != 3 {
			t.Errorf("e2e-held: %d of 3 streams flagged buffered, want all", r.Buffered)
		}
		if r := waitRow("e2e-direct", 3); r.Buffered != 0 {
			t.Errorf("e2e-direct: %d of 3 streams flagged buffered, want none", r.Buffered)
		}
	})

	t.Run("requests in flight and stalled while they run", func(t *testing.T) {
		// Four tokens a second apart: each stream spends most of its time
		// in a gap longer than the 300 ms stall threshold.
		h := map[string]string{
			simulator.HeaderTimeToFirstToken: "100ms",
			simulator.HeaderTokensPerSecond:  "1",
			simulator.HeaderOutputTokens:     "4",
		}
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { stream("/sim", "e2e-slow", h) })
		}
		var sawStalled, sawFlight bool
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !(sawStalled && sawFlight); time.Sleep(100 * time.Millisecond) {
			for _, l := range report().Live {
				if l.Model == "e2e-slow" {
					sawFlight = sawFlight || l.InFlight == 2
					sawStalled = sawStalled || l.Stalled >= 1
				}
			}
		}
		metrics := adminGet(t, admin, "/metrics")
		wg.Wait()
		if !sawFlight || !sawStalled {
			t.Errorf("while the streams ran, the stats API saw both in flight: %v, one stalled: %v", sawFlight, sawStalled)
		}
		if !strings.Contains(metrics, "tokentap_active_requests{") {
			t.Errorf("/metrics has no tokentap_active_requests")
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var left int64 = -1
			for _, l := range report().Live {
				if l.Model == "e2e-slow" {
					left = l.InFlight
				}
			}
			if left == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("e2e-slow still has %d in flight after its streams ended", left)
			}
		}
		out, err := exec.Command(bin, "stats", "--address", admin, "--window", "5m").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "e2e-slow") {
			t.Errorf("tokentap stats: %v\n%s", err, out)
		}
	})

	t.Run("the provider's output count checked", func(t *testing.T) {
		for range 3 {
			stream("/sim", "gpt-4o-mini", nil)
		}
		r := waitRow("gpt-4o-mini", 3)
		if r.UsageCheck == nil || r.UsageCheck.Verified != 3 {
			t.Fatalf("usage check %+v, want 3 requests verified (verify_usage 1, a model with a known tokenizer)", r.UsageCheck)
		}
		// The simulator reports the tokens it streamed, one word each.
		if r.UsageCheck.Mismatches != 0 || r.UsageCheck.ReportedTokens != r.UsageCheck.CountedTokens {
			t.Errorf("the simulator's honest count checked as %d reported against %d counted, %d mismatches; want equal and none",
				r.UsageCheck.ReportedTokens, r.UsageCheck.CountedTokens, r.UsageCheck.Mismatches)
		}
	})
}
