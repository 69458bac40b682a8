package caddymodule

import (
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddytest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tokentap/tokentap/meter"
	"github.com/tokentap/tokentap/sink"
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
			var h Handler
			err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
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
// after the lines'.
func TestPriceRules(t *testing.T) {
	file := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(file, []byte(`{"openai/file-model":{"input_cost_per_token":1e-06,"output_cost_per_token":2e-06}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	usage := func(src meter.UsageSource) meter.Usage {
		return meter.Usage{InputTokens: 1000, OutputTokens: 100, CacheReadInputTokens: -1, CacheCreationInputTokens: -1, ReasoningOutputTokens: -1, Source: src}
	}
	tests := []struct {
		name      string
		estimates bool
		model     string
		usage     meter.Usage
		want      float64
		priced    bool
		unpriced  bool
	}{
		{"reported", false, "line-model", usage(meter.UsageReported), (1000*2 + 100*8) / 1e6, true, false},
		{"injected", false, "line-model", usage(meter.UsageInjected), (1000*2 + 100*8) / 1e6, true, false},
		{"estimated: not a bill", false, "line-model", usage(meter.UsageEstimated), 0, false, false},
		{"estimated with cost_from_estimates", true, "line-model", usage(meter.UsageEstimated), (1000*2 + 100*8) / 1e6, true, false},
		{"no usage", false, "line-model", meter.Usage{InputTokens: -1, OutputTokens: -1, Source: meter.UsageAbsent}, 0, false, false},
		{"the file's price, by the model's own name", false, "file-model", usage(meter.UsageReported), (1000*1 + 100*2) / 1e6, true, false},
		{"no price", false, "other-model", usage(meter.UsageReported), 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			h := &Handler{Prices: []ModelPrice{{Model: "line-*", Input: 2, Output: 8}}, PricingFile: file, CostFromEstimates: tt.estimates}
			h.logger = zap.New(core)
			if err := h.provisionCost(); err != nil {
				t.Fatal(err)
			}
			x := &exchange{h: h}
			for range 3 {
				r := &sink.Result{M: &meter.Measurement{ResponseModel: tt.model, Usage: tt.usage}}
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
	t.Run("a pricing file that is not there", func(t *testing.T) {
		h := &Handler{PricingFile: filepath.Join(t.TempDir(), "missing.json"), logger: zap.NewNop()}
		if err := h.provisionCost(); err == nil || !strings.Contains(err.Error(), "pricing_file") {
			t.Errorf("error %v", err)
		}
	})
}

// costConfig prices the simulator's model sim-priced.
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
// none.
func TestCostThroughCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Caddy")
	}
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{TestRequestTimeout: 30 * time.Second})
	tester.InitServer(costConfig, "caddyfile")
	rec := integrationSpans
	for _, model := range []string{"sim-priced", "sim-unpriced"} {
		before := len(rec.Ended())
		resp, err := tester.Client.Do(simRequest(t, `{"model":"`+model+`","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"what does this cost"}]}`, nil))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		a := attrs(waitSpans(t, rec, before+1)[before])
		in, out := a["gen_ai.usage.input_tokens"].AsInt64(), a["gen_ai.usage.output_tokens"].AsInt64()
		got, ok := a["tokentap.cost.usd"]
		if model == "sim-unpriced" {
			if ok {
				t.Errorf("%s: cost %v, want none", model, got.AsFloat64())
			}
			continue
		}
		want := (float64(in)*2 + float64(out)*8) / 1e6
		if !ok || in <= 0 || out != 20 || math.Abs(got.AsFloat64()-want) > 1e-15 {
			t.Errorf("%s: cost %v (set %v) for %d in and %d out, want %v", model, got.AsFloat64(), ok, in, out, want)
		}
	}
}
