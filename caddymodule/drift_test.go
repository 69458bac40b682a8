package caddymodule

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/tokentap/tokentap/internal/stats"
)

func TestUnmarshalDrift(t *testing.T) {
	tests := []struct {
		name, input string
		want        *DriftConfig
		wantErr     string
	}{
		{"every setting", "tokentap {\n drift rate_drop 0.2 ttft_rise 0.4 evidence 10 min_baseline 32\n}",
			&DriftConfig{RateDrop: 0.2, TTFTRise: 0.4, Evidence: 10, MinBaseline: 32}, ""},
		{"one setting", "tokentap {\n drift rate_drop 0.25\n}", &DriftConfig{RateDrop: 0.25}, ""},
		{"nothing", "tokentap {\n drift\n}", nil, "drift wants"},
		{"odd arguments", "tokentap {\n drift rate_drop\n}", nil, "drift wants"},
		{"not a number", "tokentap {\n drift ttft_rise half\n}", nil, `ttft_rise "half" is not a number`},
		{"unknown", "tokentap {\n drift window 5m\n}", nil, `unknown setting "window"`},
		{"twice", "tokentap {\n drift evidence 8 evidence 9\n}", nil, "evidence given twice"},
		{"two lines", "tokentap {\n drift evidence 8\n drift rate_drop 0.2\n}", nil, "drift already specified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, ok := unmarshalTokentap(t, tt.input, tt.wantErr)
			if !ok {
				return
			}
			if h.Drift == nil || *h.Drift != *tt.want {
				t.Errorf("drift %+v, want %+v", h.Drift, tt.want)
			}
		})
	}
	// Provisioning rejects thresholds the detector cannot use.
	h := Handler{Drift: &DriftConfig{RateDrop: 1.5}}
	if err := h.provisionDrift(); err == nil || !strings.Contains(err.Error(), "drift:") {
		t.Errorf("rate_drop 1.5 provisioned: %v", err)
	}
}

// driftConfig has the default detector; the simulator streams 20 tokens.
// The speeds are slow enough that a busy machine's hiccups of a few
// milliseconds (the race detector, other packages' tests) are small beside
// a request's times: at 2,000 tokens/s and 5 ms to the first token, a 3 ms
// delay was a 30 % fall in the rate and a 50 % rise in the time to first
// token, which the detector rightly flagged (CI at 04e7438).
const driftConfig = `{
	skip_install_trust
	admin localhost:2999
	http_port 9080
	https_port 9443
}

http://localhost:9080 {
	handle_path /sim/* {
		tokentap
		reverse_proxy 127.0.0.1:9081
	}
}

http://:9081 {
	bind 127.0.0.1
	tokentap_simulator {
		time_to_first_token 20ms
		tokens_per_second 400
		output_tokens 20
	}
}
`

// TestHealthThroughCaddy: a model's requests at a steady speed (each
// request's own speed drawn within ±20 %), then at half of it: the row is
// flagged slow within 30 requests of the drop, the spans after it carry
// the tokentap.row_slow event and the spans before do not, and the stats
// row's health says slow, naming output tokens/s.
func TestHealthThroughCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Caddy")
	}
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{TestRequestTimeout: 30 * time.Second})
	tester.InitServer(driftConfig, "caddyfile")
	rec := integrationSpans
	rnd := rand.New(rand.NewPCG(18, 1))
	const steady, slowed = 130, 40
	firstSlow := -1
	for i := range steady + slowed {
		tps := 400 * (0.8 + 0.4*rnd.Float64())
		if i >= steady {
			tps /= 2
		}
		before := len(rec.Ended())
		resp, err := tester.Client.Do(simRequest(t, `{"model":"sim-drift","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"steady?"}]}`,
			map[string]string{"Tokentap-Sim-Tokens-Per-Second": strconv.FormatFloat(tps, 'f', 1, 64)}))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		span := waitSpans(t, rec, before+1)[before]
		marked := false
		for _, e := range span.Events() {
			marked = marked || e.Name == "tokentap.row_slow"
		}
		if marked && firstSlow < 0 {
			firstSlow = i
		}
		if marked && i < steady {
			t.Errorf("request %d, before the drop, marked as measured while its row was slow", i)
		}
	}
	t.Logf("flagged slow at request %d, %d after the drop", firstSlow, firstSlow-steady)
	if firstSlow < steady || firstSlow > steady+30 {
		t.Errorf("first request marked slow: %d, want within 30 of the drop at %d", firstSlow, steady)
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
	for _, r := range rep.Rows {
		if r.Model != "sim-drift" {
			continue
		}
		if r.Health == nil || r.Health.State != "slow" || !strings.Contains(r.Health.Reason, "output tokens/s") {
			t.Errorf("sim-drift health %+v, want slow, naming output tokens/s", r.Health)
		}
		return
	}
	t.Error("no sim-drift row")
}
