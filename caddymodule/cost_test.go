package caddymodule

import (
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/sink"
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

// TestPriceRules: reported and injected counts are priced; estimated ones
// only with cost_from_estimates; a model without a price is marked
// unpriced and logged once however often it comes; a file's prices apply
// after the lines'. Billed counts (Cohere's billed_units) are the bill
// where both are known: the recorded Cohere text stream's 12 billed input
// and 7 output tokens at $2.50 and $10 per million cost 12 × 2.5 + 7 × 10
// = 100 dollars per million, $0.0001, not the 507 × 2.5 + 10 × 10 =
// 1,367.5 of its processed counts, which are priced only without them.
func TestPriceRules(t *testing.T) {
	file := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(file, []byte(`{"openai/file-model":{"input_cost_per_token":1e-06,"output_cost_per_token":2e-06}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	usage := func(src meter.UsageSource) meter.Usage {
		return meter.Usage{InputTokens: 1000, OutputTokens: 100, CacheReadInputTokens: -1, CacheCreationInputTokens: -1, ReasoningOutputTokens: -1, Source: src}
	}
	// The recorded Cohere text stream's counts (meter's TestRecordedCohere).
	cohere := func(src meter.UsageSource) meter.Usage {
		return meter.Usage{InputTokens: 507, OutputTokens: 10, CacheReadInputTokens: 448, CacheCreationInputTokens: -1, ReasoningOutputTokens: -1, Source: src}
	}
	none := meter.BilledUsage{InputTokens: -1, OutputTokens: -1}
	cohereBill := meter.BilledUsage{InputTokens: 12, OutputTokens: 7}
	tests := []struct {
		name      string
		estimates bool
		model     string
		usage     meter.Usage
		billed    meter.BilledUsage
		want      float64
		priced    bool
		unpriced  bool
	}{
		{"reported", false, "line-model", usage(meter.UsageReported), none, (1000*2 + 100*8) / 1e6, true, false},
		{"injected", false, "line-model", usage(meter.UsageInjected), none, (1000*2 + 100*8) / 1e6, true, false},
		{"estimated: not a bill", false, "line-model", usage(meter.UsageEstimated), none, 0, false, false},
		{"estimated with cost_from_estimates", true, "line-model", usage(meter.UsageEstimated), none, (1000*2 + 100*8) / 1e6, true, false},
		{"no usage", false, "line-model", meter.Usage{InputTokens: -1, OutputTokens: -1, Source: meter.UsageAbsent}, none, 0, false, false},
		{"the file's price, by the model's own name", false, "file-model", usage(meter.UsageReported), none, (1000*1 + 100*2) / 1e6, true, false},
		{"no price", false, "other-model", usage(meter.UsageReported), none, 0, false, true},
		{"Cohere: billed_units are the bill", false, "command-a-03-2025", cohere(meter.UsageReported), cohereBill, 0.0001, true, false},
		{"Cohere without billed_units: the processed counts", false, "command-a-03-2025", cohere(meter.UsageReported), none, 0.0013675, true, false},
		{"Cohere with input billed alone: the processed counts", false, "command-a-03-2025", cohere(meter.UsageReported), meter.BilledUsage{InputTokens: 12, OutputTokens: -1}, 0.0013675, true, false},
		{"Cohere estimated, billed or not: not a bill", false, "command-a-03-2025", cohere(meter.UsageEstimated), cohereBill, 0, false, false},
		{"Cohere without a price: unpriced however billed", false, "command-r-plus", cohere(meter.UsageReported), cohereBill, 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			h := &Handler{Prices: []ModelPrice{{Model: "line-*", Input: 2, Output: 8}, {Model: "command-a-*", Input: 2.5, Output: 10}}, PricingFile: file, CostFromEstimates: tt.estimates}
			h.logger, h.logOnce = zap.New(core), new(onceLog)
			if err := h.provisionCost(); err != nil {
				t.Fatal(err)
			}
			x := &exchange{h: h}
			for range 3 {
				r := &sink.Result{M: &meter.Measurement{ResponseModel: tt.model, Usage: tt.usage, Billed: tt.billed}}
				x.price(r)
				if r.HasCost != tt.priced || math.Abs(r.Cost-tt.want) > 1e-15 || r.Unpriced != tt.unpriced {
					t.Fatalf("cost %v (has %v), unpriced %v; want %v (%v), %v", r.Cost, r.HasCost, r.Unpriced, tt.want, tt.priced, tt.unpriced)
				}
			}
			if n := logs.FilterField(zap.String("model", tt.model)).Len(); n != map[bool]int{true: 1}[tt.unpriced] {
				t.Errorf("%d log lines for %s, want one for an unpriced model, else none", n, tt.model)
			}
		})
	}
	// Another model's usage inside the exchange (Anthropic's advisor) is
	// priced at that model's price: 1,000 × 2 + 100 × 8 for line-model
	// and 60 × 5 + 40 × 25 for the advisor, 4,100 dollars per million; an
	// advisor without a price leaves the exchange unpriced and is the
	// model logged.
	for _, tt := range []struct {
		name, advisor    string
		want             float64
		priced, unpriced bool
	}{
		{"another model at its own price", "line-advisor", 0.0041, true, false},
		{"another model without a price: unpriced", "opus-unpriced", 0, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			h := &Handler{Prices: []ModelPrice{{Model: "line-advisor", Input: 5, Output: 25}, {Model: "line-*", Input: 2, Output: 8}}}
			h.logger, h.logOnce = zap.New(core), new(onceLog)
			if err := h.provisionCost(); err != nil {
				t.Fatal(err)
			}
			x := &exchange{h: h}
			for range 3 {
				m := &meter.Measurement{ResponseModel: "line-model", Usage: usage(meter.UsageReported), Billed: none}
				m.OtherModels[0] = meter.ModelUsage{Model: tt.advisor, Kind: "advisor_message", InputTokens: 60, OutputTokens: 40, CacheReadInputTokens: -1, CacheCreationInputTokens: -1}
				m.NumOtherModels = 1
				r := &sink.Result{M: m}
				x.price(r)
				if r.HasCost != tt.priced || math.Abs(r.Cost-tt.want) > 1e-15 || r.Unpriced != tt.unpriced {
					t.Fatalf("cost %v (has %v), unpriced %v; want %v (%v), %v", r.Cost, r.HasCost, r.Unpriced, tt.want, tt.priced, tt.unpriced)
				}
			}
			if n := logs.FilterField(zap.String("model", tt.advisor)).Len(); n != map[bool]int{true: 1}[tt.unpriced] {
				t.Errorf("%d log lines for %s, want one for an unpriced model, else none", n, tt.advisor)
			}
		})
	}
	t.Run("a pricing file that is not there", func(t *testing.T) {
		h := &Handler{PricingFile: filepath.Join(t.TempDir(), "missing.json"), logger: zap.NewNop()}
		if err := h.provisionCost(); err == nil || !strings.Contains(err.Error(), "pricing_file") {
			t.Errorf("error %v", err)
		}
	})
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
