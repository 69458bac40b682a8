package caddymodule

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"go.opentelemetry.io/otel/attribute"
)

// TestBedrockHeaderFallbackThroughCaddy: Bedrock reports a whole
// InvokeModel body's counts in its response headers, and through a real
// reverse_proxy the span has them where the body does not: all of them
// for a Cohere Command R body, the output count for a Nova body that gives
// only its input; where the body has a count of its own, the body's wins.
// The bodies and headers are recorded ones (internal/meter/testdata/recorded), but
// the last, whose headers are made to disagree with it.
func TestBedrockHeaderFallbackThroughCaddy(t *testing.T) {
	llama := `{"generation":"Hi","prompt_token_count":11,"generation_token_count":8,"stop_reason":"stop"}`
	tests := []struct {
		name, file, body string
		header           http.Header
		want             map[string]int64 // absent when negative
		latency          float64
	}{
		{
			name: "Cohere Command R: no counts in the body, all from the headers", file: "bedrock/invoke_cohere_command_r_body.json",
			want:    map[string]int64{"gen_ai.usage.input_tokens": 5, "gen_ai.usage.output_tokens": 5, "gen_ai.usage.cache_read.input_tokens": -1},
			latency: 0.141,
		},
		{
			name: "Nova behind a guardrail: the input from the body, the output and cache counts from the headers", file: "bedrock/invoke_nova_lite_guardrail_body.json",
			want:    map[string]int64{"gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 51, "gen_ai.usage.cache_read.input_tokens": 0},
			latency: 1.142,
		},
		{
			name: "Llama: the body's counts win over the headers'", body: llama,
			header:  http.Header{"X-Amzn-Bedrock-Input-Token-Count": {"99"}, "X-Amzn-Bedrock-Output-Token-Count": {"98"}, "X-Amzn-Bedrock-Invocation-Latency": {"700"}},
			want:    map[string]int64{"gen_ai.usage.input_tokens": 11, "gen_ai.usage.output_tokens": 8},
			latency: 0.7,
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]int{}
	for i, tt := range tests {
		byName[tt.name] = i
	}
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		tt := tests[byName[r.Header.Get("X-Case")]]
		body, header := []byte(tt.body), tt.header
		if tt.file != "" {
			var err error
			body, err = readRecording(tt.file)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			header = recordedHeader(tt.file)
		}
		for name, values := range header {
			w.Header()[name] = values
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})}
	go func() { _ = up.Serve(ln) }()
	t.Cleanup(func() { _ = up.Close() })
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{TestRequestTimeout: 30 * time.Second})
	tester.InitServer(fmt.Sprintf(compressedTimingConfig, ln.Addr()), "caddyfile")
	rec := integrationSpans

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(rec.Ended())
			req, _ := http.NewRequest("POST", "http://localhost:9080/up/model/m/invoke", strings.NewReader(`{"prompt":"hi"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Case", tt.name)
			resp, err := tester.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			a := attrs(waitSpans(t, rec, before+1)[before])
			if got := a[attrDialect].AsString(); got != "bedrock_invoke" {
				t.Fatalf("dialect %q", got)
			}
			for key, want := range tt.want {
				v, ok := a[attribute.Key(key)]
				switch {
				case want < 0 && ok:
					t.Errorf("%s = %v, want absent", key, v.Emit())
				case want >= 0 && (!ok || v.AsInt64() != want):
					t.Errorf("%s = %v, want %d", key, v.Emit(), want)
				}
			}
			if got := a["tokentap.server_timing.invocation_latency"].AsFloat64(); got != tt.latency {
				t.Errorf("invocation_latency %v, want %v", got, tt.latency)
			}
			if got := a["tokentap.outcome"].AsString(); got != "completed" {
				t.Errorf("outcome %q", got)
			}
		})
	}
}
