package exchange

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tokentap/tokentap/internal/slo"
)

// TestRequestObjective: with SLOHeaders, a request's own objective judges
// it instead of its model's, the headers go upstream only when kept, and a
// header that cannot be read is left out, logged once and counted as a
// degraded measurement; without SLOHeaders the headers are not read and
// pass on untouched.
func TestRequestObjective(t *testing.T) {
	table := new(slo.Table)
	// The model's own objective: every request misses it.
	if err := table.Add("*", slo.Objective{TimeToFirstToken: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		mode       SLOHeaders
		header     map[string]string
		wantMet    bool
		wantSource string
		// wantUpstream is what the upstream sees of X-Slo-Ttft-Ms.
		wantUpstream string
		wantDegraded string
	}{
		{"off: the model's objective, headers passed on", SLOHeadersOff, map[string]string{"X-Slo-Ttft-Ms": "60000"}, false, "config", "60000", ""},
		{"stripped: its own objective, met", SLOHeadersStrip, map[string]string{"X-Slo-Ttft-Ms": "60000"}, true, "request", "", ""},
		{"kept: its own objective, passed on", SLOHeadersKeep, map[string]string{"X-Slo-Ttft-Ms": "60000"}, true, "request", "60000", ""},
		{"its own output rate, met", SLOHeadersStrip, map[string]string{"X-Slo-Tpot-Ms": "60000"}, true, "request", "", ""},
		{"none stated: the model's", SLOHeadersStrip, nil, false, "config", "", ""},
		{"unreadable: the model's, degraded, still stripped", SLOHeadersStrip, map[string]string{"X-Slo-Ttft-Ms": "soon"}, false, "config", "", "slo_header_invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			var upstreamSaw string
			body := fixture(t, "chat_usage.sse")
			hs := newHarness(t, Config{SLOs: table, SLOHeaders: tt.mode, Logger: zap.New(core)}, func(w http.ResponseWriter, r *http.Request) error {
				upstreamSaw = r.Header.Get(slo.HeaderTTFT)
				return streamUpstream(body, nil)(w, r)
			})
			for range 2 {
				req, _ := http.NewRequest("POST", hs.srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","stream":true}`))
				for k, v := range tt.header {
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				<-hs.handlerErr
			}
			if upstreamSaw != tt.wantUpstream {
				t.Errorf("the upstream saw %s %q, want %q", slo.HeaderTTFT, upstreamSaw, tt.wantUpstream)
			}
			for _, s := range hs.spans.Ended() {
				a := attrs(s)
				if a["tokentap.slo.met"].AsBool() != tt.wantMet || a["tokentap.slo.source"].AsString() != tt.wantSource {
					t.Errorf("tokentap.slo.met %v source %q, want %v %q", a["tokentap.slo.met"].AsBool(), a["tokentap.slo.source"].AsString(), tt.wantMet, tt.wantSource)
				}
				if got := a[attrDegradedReason].AsString(); got != tt.wantDegraded {
					t.Errorf("degraded reason %q, want %q", got, tt.wantDegraded)
				}
			}
			wantLogs := 0
			if tt.wantDegraded != "" {
				wantLogs = 1 // once, however many requests
			}
			if n := logs.FilterMessageSnippet("stated an objective").Len(); n != wantLogs {
				t.Errorf("%d warnings, want %d", n, wantLogs)
			}
		})
	}
}
