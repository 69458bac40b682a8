package caddymodule

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/tokentap/tokentap/internal/stats"
)

func TestUnmarshalSLO(t *testing.T) {
	ms := func(n int) caddy.Duration { return caddy.Duration(time.Duration(n) * time.Millisecond) }
	tests := []struct {
		name, input string
		want        []ModelSLO
		wantErr     string
	}{
		{"every model by default", "tokentap {\n slo ttft 500ms\n}",
			[]ModelSLO{{Model: "*", TimeToFirstToken: ms(500)}}, ""},
		{"per model, every threshold", "tokentap {\n slo gpt-4o-mini* ttft 300ms tps 80 duration 10s\n slo ttft 1s\n}",
			[]ModelSLO{{Model: "gpt-4o-mini*", TimeToFirstToken: ms(300), OutputTokensPerSecond: 80, Duration: ms(10000)}, {Model: "*", TimeToFirstToken: ms(1000)}}, ""},
		{"no threshold", "tokentap {\n slo gpt-4o\n}", nil, "slo wants"},
		{"bad duration", "tokentap {\n slo ttft soon\n}", nil, `ttft "soon" is not a positive duration`},
		{"zero duration", "tokentap {\n slo duration 0s\n}", nil, `duration "0s" is not a positive duration`},
		{"bad rate", "tokentap {\n slo m tps fast\n}", nil, `tps "fast" is not a positive number`},
		{"negative rate", "tokentap {\n slo m tps -5\n}", nil, `tps "-5" is not a positive number`},
		{"unknown threshold", "tokentap {\n slo m itl 20ms\n}", nil, `unknown threshold "itl"`},
		{"a threshold twice", "tokentap {\n slo ttft 1s ttft 2s\n}", nil, "ttft given twice"},
		{"a model twice", "tokentap {\n slo m ttft 1s\n slo m tps 5\n}", nil, "slo m already specified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := unmarshalTokentap(t, tt.input, tt.wantErr)
			if !ok {
				return
			}
			if len(h.SLOs) != len(tt.want) {
				t.Fatalf("slos %+v, want %+v", h.SLOs, tt.want)
			}
			for i := range h.SLOs {
				if h.SLOs[i] != tt.want[i] {
					t.Errorf("slo %d: %+v, want %+v", i, h.SLOs[i], tt.want[i])
				}
			}
		})
	}
}

func TestUnmarshalSLOHeaders(t *testing.T) {
	tests := []struct {
		name, input, want, wantErr string
	}{
		{"off by default", "tokentap {\n slo ttft 1s\n}", "", ""},
		{"on: stripped before the upstream", "tokentap {\n slo_headers\n}", "strip", ""},
		{"stripped, said", "tokentap {\n slo_headers strip\n}", "strip", ""},
		{"kept for the upstream", "tokentap {\n slo_headers keep\n}", "keep", ""},
		{"an unknown mode", "tokentap {\n slo_headers drop\n}", "", `slo_headers "drop": want strip or keep`},
		{"two arguments", "tokentap {\n slo_headers keep strip\n}", "", "wrong argument count"},
		{"twice", "tokentap {\n slo_headers\n slo_headers keep\n}", "", "slo_headers already specified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := unmarshalTokentap(t, tt.input, tt.wantErr)
			if ok && h.SLOHeaders != tt.want {
				t.Errorf("slo_headers %q, want %q", h.SLOHeaders, tt.want)
			}
		})
	}
}

// sloConfig holds sim-slo to a first token within 150 ms and 50 tokens/s;
// other models have no objective; a request may state its own.
const sloConfig = `{
	skip_install_trust
	admin localhost:2999
	http_port 9080
	https_port 9443
}

http://localhost:9080 {
	handle_path /sim/* {
		tokentap {
			slo sim-slo ttft 150ms tps 50
			slo_headers
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

// TestSLOThroughCaddy: the simulator's per-request speed headers make
// requests that meet sim-slo's objective and requests that miss it by each
// threshold; the spans carry the verdicts, and the live stats row the
// attainment and the token goodput they add up to.
func TestSLOThroughCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Caddy")
	}
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{TestRequestTimeout: 30 * time.Second})
	tester.InitServer(sloConfig, "caddyfile")
	rec := integrationSpans
	cases := []struct {
		name   string
		model  string
		header map[string]string
		// met is the span's tokentap.slo.met; absent when not judged.
		met    bool
		judged bool
	}{
		{"fast: met", "sim-slo", nil, true, true},
		{"first token late: missed", "sim-slo", map[string]string{"Tokentap-Sim-Time-To-First-Token": "300ms"}, false, true},
		{"20 tokens/s: missed", "sim-slo", map[string]string{"Tokentap-Sim-Tokens-Per-Second": "20"}, false, true},
		{"upstream error: missed", "sim-slo", map[string]string{"Tokentap-Sim-Status": "500"}, false, true},
		{"another model: not judged", "sim-other", map[string]string{"Tokentap-Sim-Time-To-First-Token": "300ms"}, false, false},
		{"its own looser objective: met, where the model's misses", "sim-slo", map[string]string{"Tokentap-Sim-Time-To-First-Token": "300ms", "X-Slo-Ttft-Ms": "2000"}, true, true},
		{"its own objective, for a model without one: missed", "sim-other", map[string]string{"Tokentap-Sim-Time-To-First-Token": "300ms", "X-Slo-Ttft-Ms": "100"}, false, true},
		{"its own output rate: missed at 20 tokens/s", "sim-other", map[string]string{"Tokentap-Sim-Tokens-Per-Second": "20", "X-Slo-Tpot-Ms": "25"}, false, true},
	}
	for _, c := range cases {
		before := len(rec.Ended())
		resp, err := tester.Client.Do(simRequest(t, `{"model":"`+c.model+`","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"how fast"}]}`, c.header))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		a := attrs(waitSpans(t, rec, before+1)[before])
		got, ok := a["tokentap.slo.met"]
		if ok != c.judged || ok && got.AsBool() != c.met {
			t.Errorf("%s: tokentap.slo.met %v (set %v), want %v (set %v); outcome %v, ttft %v",
				c.name, got.AsBool(), ok, c.met, c.judged, a["tokentap.outcome"].AsString(), a["gen_ai.response.time_to_first_chunk"].AsFloat64())
		}
		wantSource := ""
		if c.judged {
			wantSource = "config"
			if c.header["X-Slo-Ttft-Ms"] != "" || c.header["X-Slo-Tpot-Ms"] != "" {
				wantSource = "request"
			}
		}
		if got := a["tokentap.slo.source"].AsString(); got != wantSource {
			t.Errorf("%s: tokentap.slo.source %q, want %q", c.name, got, wantSource)
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
	found := map[string]*stats.SLOSummary{}
	for _, r := range rep.Rows {
		found[r.Model] = r.SLO
	}
	s := found["sim-slo"]
	// Two requests of five met, each with the simulator's 20 output
	// tokens: 40 goodput tokens over the 60 s window.
	if s == nil || s.Requests != 5 || s.Met != 2 || s.Attainment != 0.4 || math.Abs(s.TokenGoodput-40.0/60) > 1e-6 {
		t.Errorf("sim-slo row's slo %+v, want 5 requests, 2 met, attainment 0.4, token goodput 0.666667", s)
	}
	// sim-other has no objective of its own: only the two requests that
	// stated one were judged.
	if s := found["sim-other"]; s == nil || s.Requests != 2 || s.Met != 0 {
		t.Errorf("sim-other row's slo %+v, want 2 requests judged, none met", s)
	}
}
