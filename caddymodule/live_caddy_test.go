package caddymodule

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	dto "github.com/prometheus/client_model/go"

	"github.com/tokentap/tokentap/internal/stats"
)

// Ports of the live-gauge test: admin 2377, proxy 9377 (9378 is the HTTPS
// port Caddy needs but never listens on here). The upstream is the test's
// own, on a free port.
const (
	liveAdmin = "localhost:2377"
	liveProxy = "127.0.0.1:9377"
)

const liveConfig = `{
	skip_install_trust
	admin ` + liveAdmin + `
	http_port 9377
	https_port 9378
	grace_period 1ns
}

http://` + liveProxy + ` {
	bind 127.0.0.1
	handle_path /up/* {
		tokentap {
			stall_threshold 300ms
		}
		reverse_proxy %s
	}
}
`

// TestLiveThroughCaddy holds three streams open through a real Caddy, one
// in each state, and reads them while they run, as an operator would during
// an incident: on Caddy's /metrics, in the stats API and in `tokentap
// stats`. One stream has had no byte of its body yet, one writes every
// 50 ms, one wrote once and went silent past the stall threshold. When the
// upstream lets them end, every count falls to zero.
func TestLiveThroughCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Caddy")
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	release := make(chan struct{})
	event := []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n")
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Model string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		flush := func() { _ = http.NewResponseController(w).Flush() }
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		flush()
		switch req.Model {
		case "live-receiving":
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for done := false; !done; {
				select {
				case <-tick.C:
					_, _ = w.Write(event)
					flush()
				case <-release:
					done = true
				}
			}
		case "live-stalled":
			_, _ = w.Write(event)
			flush()
			<-release
		default: // live-waiting
			<-release
		}
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
	}))
	defer upstream.Close()
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{AdminPort: 2377, TestRequestTimeout: 30 * time.Second})
	tester.InitServer(fmt.Sprintf(liveConfig, strings.TrimPrefix(upstream.URL, "http://")), "caddyfile")
	waitProxyListening(t, "http://"+liveProxy+"/up/")

	models := []string{"live-waiting", "live-receiving", "live-stalled"}
	var wg sync.WaitGroup
	started := make(chan struct{}, len(models))
	for _, m := range models {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post("http://"+liveProxy+"/up/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"`+m+`","stream":true}`))
			if err != nil {
				t.Error(err)
				started <- struct{}{}
				return
			}
			defer resp.Body.Close()
			started <- struct{}{}
			_, _ = io.Copy(io.Discard, bufio.NewReader(resp.Body))
		}()
	}
	for range models {
		<-started
	}
	// Every test's exchanges share the process's table: only this test's
	// models are read.
	type state struct{ inFlight, waiting, receiving, stalled int64 }
	live := func() map[string]state {
		resp, err := http.Get("http://" + liveAdmin + "/tokentap/stats?window=1m")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var rep stats.Report
		if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
			t.Fatal(err)
		}
		out := map[string]state{}
		for _, r := range rep.Live {
			if strings.HasPrefix(r.Model, "live-") {
				out[r.Model] = state{r.InFlight, r.Waiting, r.Receiving, r.Stalled}
			}
		}
		return out
	}
	gauge := func() map[string]state {
		mfs := promScrapeText(t, "http://"+liveAdmin+"/metrics", "")
		out := map[string]state{}
		mf := mfs["tokentap_active_requests"]
		if mf == nil {
			t.Fatalf("no tokentap_active_requests on /metrics")
		}
		for _, m := range mf.GetMetric() {
			model, st := labelValue(m, "gen_ai_request_model"), labelValue(m, "tokentap_request_state")
			if !strings.HasPrefix(model, "live-") {
				continue
			}
			s := out[model]
			v := int64(m.GetGauge().GetValue())
			switch st {
			case "waiting":
				s.waiting = v
			case "receiving":
				s.receiving = v
			case "stalled":
				s.stalled = v
			default:
				t.Errorf("state %q", st)
			}
			s.inFlight += v
			out[model] = s
		}
		return out
	}
	running := map[string]state{
		"live-waiting":   {1, 1, 0, 0},
		"live-receiving": {1, 0, 1, 0},
		"live-stalled":   {1, 0, 0, 1},
	}
	// The stalled stream is stalled once 300 ms have passed since its
	// one event; until then it is receiving.
	var got map[string]state
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if got = live(); fmt.Sprint(got) == fmt.Sprint(running) || time.Now().After(deadline) {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(running) {
		t.Errorf("stats API while running: %v, want %v", got, running)
	}
	if g := gauge(); fmt.Sprint(g) != fmt.Sprint(running) {
		t.Errorf("/metrics while running: %v, want %v", g, running)
	}
	out, err := runStatsCommand(t, "--address", liveAdmin, "--window", "1m")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "In flight now") || !containsFields(out, "live-stalled", "1", "0", "0", "1") {
		t.Errorf("tokentap stats while running does not show the stalled stream:\n%s", out)
	}

	close(release)
	wg.Wait()
	ended := map[string]state{"live-waiting": {}, "live-receiving": {}, "live-stalled": {}}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if got = live(); fmt.Sprint(got) == fmt.Sprint(ended) || time.Now().After(deadline) {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(ended) {
		t.Errorf("stats API once ended: %v, want %v", got, ended)
	}
	if g := gauge(); fmt.Sprint(g) != fmt.Sprint(ended) {
		t.Errorf("/metrics once ended: %v, want %v", g, ended)
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// containsFields reports whether some line of s has exactly fields.
func containsFields(s string, fields ...string) bool {
	for _, line := range strings.Split(s, "\n") {
		if strings.Join(strings.Fields(line), " ") == "openai "+strings.Join(fields, " ") {
			return true
		}
	}
	return false
}
