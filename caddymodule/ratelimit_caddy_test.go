package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"

	"github.com/tokentap/tokentap/internal/stats"
)

// Ports of the rate limit test: admin 2350, proxy 9350; the upstream is
// an httptest server on a free port.
const (
	rlAdmin = "localhost:2350"
	rlProxy = "localhost:9350"
)

// rlConfig has tokentap in front of an upstream that answers as OpenAI
// and Anthropic do, with their rate limit headers, behind reverse_proxy.
const rlConfig = `{
	skip_install_trust
	admin ` + rlAdmin + `
	http_port 9350
	https_port 9351
	grace_period 1ns
}

http://` + rlProxy + ` {
	tokentap {
		label team {http.request.header.X-Team}
	}
	reverse_proxy %s
}
`

// rlUpstream answers /v1/chat/completions as OpenAI does and /v1/messages
// as Anthropic does, each with its rate limit headers; X-Status 429 makes
// either a throttled answer with retry-after.
func rlUpstream(t *testing.T) *httptest.Server {
	openaiSSE := "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"rl-openai\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"rl-openai\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n" +
		"data: [DONE]\n\n"
	anthropicJSON := `{"id":"msg_1","type":"message","role":"assistant","model":"rl-anthropic","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		h := w.Header()
		throttled := r.Header.Get("X-Status") == "429"
		switch r.URL.Path {
		case "/v1/chat/completions":
			h.Set("x-ratelimit-limit-requests", "60")
			h.Set("x-ratelimit-remaining-requests", "15")
			h.Set("x-ratelimit-reset-requests", "45s")
			h.Set("x-ratelimit-limit-tokens", "150000")
			h.Set("x-ratelimit-remaining-tokens", "120000")
			h.Set("x-ratelimit-reset-tokens", "6m0s")
			if throttled {
				h.Set("retry-after", "20")
				h.Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
				return
			}
			h.Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, openaiSSE)
		case "/v1/messages":
			reset := time.Now().Add(30 * time.Second).UTC().Format(time.RFC3339)
			for _, kind := range []string{"requests", "input-tokens", "output-tokens"} {
				h.Set("anthropic-ratelimit-"+kind+"-limit", "1000")
				h.Set("anthropic-ratelimit-"+kind+"-remaining", "500")
				h.Set("anthropic-ratelimit-"+kind+"-reset", reset)
			}
			h.Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, anthropicJSON)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestRateLimitThroughCaddy runs tokentap inside a real Caddy in front of
// an upstream that sends OpenAI's and Anthropic's rate limit headers and a
// 429 with retry-after: the spans carry the values, the Prometheus gauges
// on Caddy's admin /metrics the latest remaining share per model, and the
// stats JSON each row's headroom and its throttled count.
func TestRateLimitThroughCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Caddy")
	}
	up := rlUpstream(t)
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{AdminPort: 2350, TestRequestTimeout: 30 * time.Second})
	tester.InitServer(fmt.Sprintf(rlConfig, strings.TrimPrefix(up.URL, "http://")), "caddyfile")
	waitProxyListening(t, "http://"+rlProxy+"/")

	before := len(integrationSpans.Ended())
	send := func(path, body string, status string) {
		t.Helper()
		req, err := http.NewRequest("POST", "http://"+rlProxy+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Team", "rl")
		if status != "" {
			req.Header.Set("X-Status", status)
		}
		resp, err := tester.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	send("/v1/chat/completions", `{"model":"rl-openai","stream":true,"messages":[]}`, "")
	send("/v1/messages", `{"model":"rl-anthropic","max_tokens":5,"messages":[]}`, "")
	send("/v1/chat/completions", `{"model":"rl-openai","stream":true,"messages":[]}`, "429")
	spans := waitSpans(t, integrationSpans, before+3)[before:]

	t.Run("spans", func(t *testing.T) {
		for i, want := range []map[attribute.Key]attribute.Value{
			{"tokentap.ratelimit.requests.remaining_share": attribute.Float64Value(0.25), "tokentap.ratelimit.tokens.reset": attribute.Float64Value(360), "tokentap.outcome": attribute.StringValue("completed")},
			{"tokentap.ratelimit.output_tokens.remaining_share": attribute.Float64Value(0.5), "tokentap.ratelimit.input_tokens.limit": attribute.Int64Value(1000)},
			{"tokentap.ratelimit.retry_after": attribute.Float64Value(20), "tokentap.outcome": attribute.StringValue("throttled"), "error.type": attribute.StringValue("429")},
		} {
			a := attrs(spans[i])
			for k, v := range want {
				if a[k] != v {
					t.Errorf("span %d: %s = %s, want %s", i, k, a[k].Emit(), v.Emit())
				}
			}
		}
	})

	t.Run("gauges on the admin /metrics", func(t *testing.T) {
		mfs := promScrapeText(t, "http://"+rlAdmin+"/metrics", "")
		// The exporter names unit 1 a ratio.
		share := mfs["tokentap_ratelimit_remaining_share_ratio"]
		if share == nil || share.GetType() != dto.MetricType_GAUGE {
			t.Fatalf("no tokentap_ratelimit_remaining_share_ratio gauge: %v", share)
		}
		for _, tt := range []struct {
			model, kind string
			want        float64
		}{
			{"rl-openai", "requests", 0.25},
			{"rl-openai", "tokens", 0.8},
			{"rl-anthropic", "output_tokens", 0.5},
		} {
			m := promSeries(share, map[string]string{"gen_ai_response_model": tt.model, "tokentap_ratelimit_kind": tt.kind, "tokentap_label_team": "rl", "gen_ai_provider_name": map[string]string{"rl-openai": "openai", "rl-anthropic": "anthropic"}[tt.model]})
			if m == nil {
				t.Errorf("no %s %s series", tt.model, tt.kind)
				continue
			}
			if got := m.GetGauge().GetValue(); got != tt.want {
				t.Errorf("%s %s share = %v, want %v", tt.model, tt.kind, got, tt.want)
			}
		}
		if _, ok := mfs["tokentap_ratelimit_reset_seconds"]; !ok {
			t.Error("no tokentap_ratelimit_reset_seconds gauge")
		}
	})

	t.Run("stats", func(t *testing.T) {
		resp, err := http.Get("http://" + rlAdmin + "/tokentap/stats?window=1m")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rep stats.Report
		if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
			t.Fatal(err)
		}
		got := map[string]stats.ReportRow{}
		for _, r := range rep.Rows {
			got[r.Model] = r
		}
		o, a := got["rl-openai"], got["rl-anthropic"]
		if o.Requests != 2 || o.Throttled != 1 || o.Errors != 0 {
			t.Errorf("rl-openai requests, throttled, errors = %d, %d, %d; want 2, 1, 0", o.Requests, o.Throttled, o.Errors)
		}
		if rl := o.RateLimit; rl == nil || rl.Requests == nil || *rl.Requests.RemainingShare != 0.25 || rl.RetryAfterSeconds == nil || *rl.RetryAfterSeconds != 20 {
			t.Errorf("rl-openai rate_limit = %+v, want requests 0.25 left and the 429's retry-after 20", rl)
		}
		if rl := a.RateLimit; rl == nil || rl.Tokens == nil || *rl.Tokens.RemainingShare != 0.5 || rl.RetryAfterSeconds != nil {
			t.Errorf("rl-anthropic rate_limit = %+v, want tokens 0.5 left", rl)
		}
	})
}
