package caddymodule

import (
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
)

func TestUnmarshalPrice(t *testing.T) {
	tests := []struct {
		name, input string
		want        []ModelPrice
		wantErr     string
	}{
		{"input and output", "tokentap {\n price gpt-4o-mini* input 0.15 output 0.6\n}",
			[]ModelPrice{{Model: "gpt-4o-mini*", Input: 0.15, Output: 0.6}}, ""},
		{"every price, two lines", "tokentap {\n price claude-* input 3 output 15 cache_read 0.3 cache_write 3.75\n price o3 input 2 output 8 reasoning 8\n}",
			[]ModelPrice{{Model: "claude-*", Input: 3, Output: 15, CacheRead: new(0.3), CacheWrite: new(3.75)}, {Model: "o3", Input: 2, Output: 8, Reasoning: new(8.0)}}, ""},
		{"output missing", "tokentap {\n price m input 1 cache_read 0.5\n}", nil, "input and output are required"},
		{"odd arguments", "tokentap {\n price m input 1 output\n}", nil, "price wants"},
		{"not a number", "tokentap {\n price m input cheap output 1\n}", nil, `input "cheap" is not a number`},
		{"unknown price", "tokentap {\n price m input 1 output 1 audio 5\n}", nil, `unknown price "audio"`},
		{"a price twice", "tokentap {\n price m input 1 output 1 input 2\n}", nil, "input given twice"},
		{"a model twice", "tokentap {\n price m input 1 output 1\n price m input 2 output 2\n}", nil, "price m already specified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := unmarshalTokentap(t, tt.input, tt.wantErr)
			if !ok {
				return
			}
			if len(h.Prices) != len(tt.want) {
				t.Fatalf("prices %+v, want %+v", h.Prices, tt.want)
			}
			for i, p := range h.Prices {
				w := tt.want[i]
				if p.Model != w.Model || p.Input != w.Input || p.Output != w.Output ||
					!samePtr(p.CacheRead, w.CacheRead) || !samePtr(p.CacheWrite, w.CacheWrite) || !samePtr(p.Reasoning, w.Reasoning) {
					t.Errorf("price %d: %+v, want %+v", i, p, w)
				}
			}
		})
	}
}

func samePtr(a, b *float64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

// TestPricingFileMissing: a pricing file that cannot be read fails the
// configuration, naming the option.
func TestPricingFileMissing(t *testing.T) {
	h := &Handler{PricingFile: filepath.Join(t.TempDir(), "missing.json"), logger: zap.NewNop()}
	if err := h.provisionCost(); err == nil || !strings.Contains(err.Error(), "pricing_file") {
		t.Errorf("error %v", err)
	}
}

// costConfig prices the simulator's model sim-priced, and Cohere's Command
// A models behind /cohere/, whose upstream, the %s, is the test's server
// of a recorded stream.
const costConfig = `{
	skip_install_trust
	admin localhost:2999
	http_port 9080
	https_port 9443
}

http://localhost:9080 {
	handle_path /sim/* {
		tokentap {
			price sim-priced input 2 output 8
		}
		reverse_proxy 127.0.0.1:9081
	}
	handle_path /cohere/* {
		tokentap {
			price command-a-* input 2.5 output 10
		}
		reverse_proxy %s
	}
}

http://:9081 {
	bind 127.0.0.1
	tokentap_simulator {
		time_to_first_token 10ms
		tokens_per_second 1000
		output_tokens 20
	}
}
`

// TestCostThroughCaddy: a priced model's span carries tokentap.cost.usd,
// its reported usage at the configured prices; an unpriced one carries
// none. The real recorded Cohere text stream
// (internal/meter/testdata/recorded/cohere/chat_text.sse) keeps its processed
// counts in gen_ai.usage.* (507 in, 10 out), carries its billed_units in
// tokentap.usage.billed_input_tokens and billed_output_tokens (12, 7) and
// costs those at $2.50 and $10 per million: 12 × 2.5 + 7 × 10 = 100
// dollars per million, $0.0001.
func TestCostThroughCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Caddy")
	}
	const recording = "cohere/chat_text.sse"
	if _, err := readRecording(recording); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		body, _ := readRecording(recording)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(body)
	})}
	go func() { _ = up.Serve(ln) }()
	t.Cleanup(func() { _ = up.Close() })
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{TestRequestTimeout: 30 * time.Second})
	tester.InitServer(fmt.Sprintf(costConfig, ln.Addr()), "caddyfile")
	rec := integrationSpans

	// simulated is the simulator's exchange at sim-priced's prices: its
	// output is 20 tokens, its input whatever it counted.
	simulated := func(in, out int64) float64 { return (float64(in)*2 + float64(out)*8) / 1e6 }
	tests := []struct {
		name, path, body string
		// in and out are gen_ai.usage.*, -1 for whatever the upstream
		// counted (more than none); billedIn and billedOut the billed
		// attributes, -1 for absent.
		in, out, billedIn, billedOut int64
		// cost is the expected tokentap.cost.usd given the span's
		// counts; nil for none.
		cost func(in, out int64) float64
	}{
		{"priced simulator model", "/sim/v1/chat/completions",
			`{"model":"sim-priced","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"what does this cost"}]}`,
			-1, 20, -1, -1, simulated},
		{"unpriced simulator model", "/sim/v1/chat/completions",
			`{"model":"sim-unpriced","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"what does this cost"}]}`,
			-1, 20, -1, -1, nil},
		{"recorded Cohere stream: billed_units priced", "/cohere/v2/chat",
			`{"model":"command-a-03-2025","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			507, 10, 12, 7, func(int64, int64) float64 { return 0.0001 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(rec.Ended())
			req, err := http.NewRequest("POST", "http://localhost:9080"+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := tester.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			a := attrs(waitSpans(t, rec, before+1)[before])
			in, out := a["gen_ai.usage.input_tokens"].AsInt64(), a["gen_ai.usage.output_tokens"].AsInt64()
			if (tt.in < 0 && in <= 0) || (tt.in >= 0 && in != tt.in) || out != tt.out {
				t.Errorf("gen_ai.usage: %d in, %d out; want %d (-1: any), %d", in, out, tt.in, tt.out)
			}
			for _, c := range []struct {
				key  attribute.Key
				want int64
			}{{"tokentap.usage.billed_input_tokens", tt.billedIn}, {"tokentap.usage.billed_output_tokens", tt.billedOut}} {
				v, ok := a[c.key]
				if c.want < 0 && ok || c.want >= 0 && (!ok || v.AsInt64() != c.want) {
					t.Errorf("%s = %v (set %v), want %d (-1: absent)", c.key, v.Emit(), ok, c.want)
				}
			}
			got, ok := a["tokentap.cost.usd"]
			if tt.cost == nil {
				if ok {
					t.Errorf("cost %v, want none", got.AsFloat64())
				}
				return
			}
			if want := tt.cost(in, out); !ok || math.Abs(got.AsFloat64()-want) > 1e-15 {
				t.Errorf("cost %v (set %v) for %d in and %d out, want %v", got.AsFloat64(), ok, in, out, want)
			}
		})
	}
}
