package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/tokentap/tokentap/internal/meter/tokencount"
	"github.com/tokentap/tokentap/internal/stats"
)

func TestUnmarshalVerifyUsage(t *testing.T) {
	tests := []struct {
		name, input string
		want        float64
		wantErr     string
	}{
		{"off by default", "tokentap", 0, ""},
		{"a share", "tokentap {\n verify_usage 0.05\n}", 0.05, ""},
		{"every request", "tokentap {\n verify_usage 1\n}", 1, ""},
		{"zero is not a share to ask for", "tokentap {\n verify_usage 0\n}", 0, "verify_usage: want a share in (0, 1]"},
		{"over one", "tokentap {\n verify_usage 1.5\n}", 0, "verify_usage: want a share in (0, 1]"},
		{"not a number", "tokentap {\n verify_usage half\n}", 0, "verify_usage: want a share in (0, 1]"},
		{"no argument", "tokentap {\n verify_usage\n}", 0, "wrong argument count"},
		{"twice", "tokentap {\n verify_usage 1\n verify_usage 1\n}", 0, "verify_usage already specified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := unmarshalTokentap(t, tt.input, tt.wantErr)
			if ok && h.VerifyUsage != tt.want {
				t.Errorf("verify_usage %v, want %v", h.VerifyUsage, tt.want)
			}
		})
	}
}

// verifyConfig checks every request's usage on a route to an upstream
// whose usage the test doctors.
const verifyConfig = `{
	skip_install_trust
	admin localhost:2999
	http_port 9080
	https_port 9443
}

http://localhost:9080 {
	tokentap {
		verify_usage 1
	}
	reverse_proxy %s
}
`

// TestVerifyUsageThroughCaddy: through a real Caddy, an upstream that
// reports the output it streamed and one that reports three times as much
// land in one stats row with two verified requests, one mismatch and the
// summed ratio, and the lying one's span is marked.
func TestVerifyUsageThroughCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Caddy")
	}
	const model = "gpt-4o-verify-through-caddy"
	text := strings.Repeat("Tokens counted at the proxy should match what the provider bills. ", 6)
	o200k, _ := tokencount.New("o200k_base")
	n := o200k.Tokens([]byte(text))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		reported := n
		if r.Header.Get("X-Lie") != "" {
			reported = 3 * n
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i, word := range strings.Split(text, " ") {
			if i > 0 {
				word = " " + word
			}
			fmt.Fprintf(w, "data: {\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", model, word)
		}
		fmt.Fprintf(w, "data: {\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", model)
		fmt.Fprintf(w, "data: {\"model\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", model, reported)
	})}
	go func() { _ = up.Serve(ln) }()
	t.Cleanup(func() { _ = up.Close() })
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{TestRequestTimeout: 30 * time.Second})
	tester.InitServer(fmt.Sprintf(verifyConfig, ln.Addr()), "caddyfile")
	rec := integrationSpans

	for _, lie := range []bool{false, true} {
		before := len(rec.Ended())
		req, _ := http.NewRequest("POST", "http://localhost:9080/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true}}`))
		req.Header.Set("Content-Type", "application/json")
		if lie {
			req.Header.Set("X-Lie", "1")
		}
		resp, err := tester.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		a := attrs(waitSpans(t, rec, before+1)[before])
		if got := a["tokentap.usage.verified.output_tokens"].AsInt64(); got != n {
			t.Errorf("lie %v: tokentap.usage.verified.output_tokens %d, want %d", lie, got, n)
		}
		if got := a["tokentap.usage.verified.mismatch"].AsBool(); got != lie {
			t.Errorf("lie %v: tokentap.usage.verified.mismatch %v", lie, got)
		}
	}

	resp, err := http.Get("http://localhost:2999/tokentap/stats?window=1m")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep stats.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	want := stats.UsageCheckSummary{Verified: 2, Mismatches: 1, ReportedTokens: 4 * n, CountedTokens: 2 * n, Ratio: 2}
	for _, r := range rep.Rows {
		if r.Model != model {
			continue
		}
		if r.UsageCheck == nil || *r.UsageCheck != want {
			t.Fatalf("the row's usage_check %+v, want %+v", r.UsageCheck, want)
		}
		return
	}
	t.Fatalf("no row for %s in %+v", model, rep.Rows)
}

// TestEstimatorUsable: the estimator's vocabulary is loaded at
// provisioning only where a stream can lack usage and be counted by it.
func TestEstimatorUsable(t *testing.T) {
	tests := []struct {
		name string
		h    Handler
		want bool
	}{
		{"default", Handler{}, true},
		{"Chat Completions forced", Handler{Dialect: "openai_chat"}, true},
		{"inject_usage: every stream reports usage", Handler{InjectUsage: true}, false},
		{"another dialect: its streams are never tokenized", Handler{Dialect: "anthropic_messages"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.h.estimatorUsable(); got != tt.want {
				t.Errorf("estimatorUsable() = %v, want %v", got, tt.want)
			}
		})
	}
}
