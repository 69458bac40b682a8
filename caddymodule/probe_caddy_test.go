package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/tokentap/tokentap/internal/probe"
	"github.com/tokentap/tokentap/internal/stats"
)

// The probe test's ports: a Caddy process holds one config, so the test
// runs alone in it, as the stats tests do, on ports of its own.
const (
	probeAdmin = "localhost:2340"
	probeProxy = "127.0.0.1:9340"
	probeSim   = "127.0.0.1:9341"
)

// probeModel is the probed model, new for each run of the test (-count):
// the live stats and the recorded spans are the process's and outlive a
// run.
var probeModel string

// probeCaddyfile has a route measured by tokentap in front of the
// simulator, and the tokentap_probe app probing it every INTERVAL. The
// simulator's site refuses a request that still carries the probe header
// (418) or lacks the credential the probe takes from the environment
// (401), so a probe that leaked the one or lost the other fails, and the
// stats row counts it as an error.
const probeCaddyfile = `{
	admin ` + probeAdmin + `
	http_port 9342
	https_port 9343
	grace_period 1ns
	skip_install_trust
	log {
		level ERROR
	}
	tokentap_probe {
		interval INTERVAL
		max_tokens 8
		target it-sim http://` + probeProxy + `/sim/v1 MODEL {
			header Authorization "Bearer {env.TOKENTAP_PROBE_IT_KEY}"
		}
		target it-tls https://localhost:9343/sim/v1 MODEL {
			header Authorization "Bearer {env.TOKENTAP_PROBE_IT_KEY}"
		}
	}
}

https://localhost:9343 {
	bind 127.0.0.1
	tls internal
	handle_path /sim/* {
		tokentap
		reverse_proxy ` + probeSim + `
	}
}

http://:9340 {
	bind 127.0.0.1
	handle_path /sim/* {
		tokentap
		reverse_proxy ` + probeSim + `
	}
}

http://:9341 {
	bind 127.0.0.1
	@leaked header Tokentap-Probe *
	respond @leaked 418
	@unauthorized not header Authorization "Bearer it-secret"
	respond @unauthorized 401
	tokentap_simulator {
		time_to_first_token 20ms
		tokens_per_second 400
		output_tokens 8
	}
}
`

func loadProbeCaddyfile(t *testing.T, interval string) {
	t.Helper()
	cfg, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(strings.NewReplacer("INTERVAL", interval, "MODEL", probeModel).Replace(probeCaddyfile)), nil)
	if err != nil {
		t.Fatalf("adapting the Caddyfile: %v", err)
	}
	for _, w := range warnings {
		t.Logf("adapting: %s", w)
	}
	if err := caddy.Load(cfg, true); err != nil {
		t.Fatalf("loading the config: %v", err)
	}
}

// proberGoroutines counts the goroutines running a prober's target loop.
func proberGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "probe.(*Prober).run(")
		}
		buf = make([]byte, 2*len(buf))
	}
}

func waitProberGoroutines(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := proberGoroutines()
		if n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d prober goroutines, want %d", n, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// probeVars reads the prober's counts per target from /debug/vars.
func probeVars(t *testing.T) map[string]probe.CountsSnapshot {
	t.Helper()
	resp, err := http.Get("http://" + probeAdmin + "/debug/vars")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var vars struct {
		Probe map[string]probe.CountsSnapshot `json:"tokentap_probe"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&vars); err != nil {
		t.Fatal(err)
	}
	return vars.Probe
}

// probeRow reads the probed model's row from the admin API's live stats.
func probeRow(t *testing.T) (stats.ReportRow, bool) {
	t.Helper()
	resp, err := http.Get("http://" + probeAdmin + "/tokentap/stats?window=1m")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep stats.Report
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Rows {
		if r.Model == probeModel {
			return r, true
		}
	}
	return stats.ReportRow{}, false
}

// TestProbeThroughCaddy runs the tokentap_probe app from a Caddyfile
// against tokentap's own route: with no client traffic at all, the
// model's stats row counts the probes, every one completed (so none
// carried the probe header upstream and each had the credential from the
// environment), their spans say tokentap.probe, and /debug/vars counts
// them. A reload replaces the prober without leaving the old one running,
// and stopping Caddy stops it.
func TestProbeThroughCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real Caddy")
	}
	t.Setenv("TOKENTAP_PROBE_IT_KEY", "it-secret")
	probeModel = fmt.Sprintf("probe-baseline-%d", time.Now().UnixNano())
	before := proberGoroutines()
	counted := probe.GlobalCounts()["it-sim"] // the counts outlive a run
	countedTLS := probe.GlobalCounts()["it-tls"]
	loadProbeCaddyfile(t, "1s")
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stopStatsCaddy(t)
		}
	})
	waitAnswers(t, "http://"+probeAdmin+"/tokentap/stats")
	waitProberGoroutines(t, before+2)

	const want = 3
	var row stats.ReportRow
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r, ok := probeRow(t)
		// Both targets probe the model, each about want times by then.
		if ok && r.Requests >= 2*want {
			row = r
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the %s row after 20 s of probes every second: %+v (found: %v), want %d requests", probeModel, r, ok, 2*want)
		}
	}
	if row.Errors != 0 {
		t.Errorf("%d of the %d probes failed: the probe header reached the upstream (418) or the credential did not (401)", row.Errors, row.Requests)
	}

	var probes int
	for _, s := range integrationSpans.Ended() {
		a := attrs(s)
		if a["gen_ai.request.model"].AsString() != probeModel {
			continue
		}
		if !a["tokentap.probe"].AsBool() {
			t.Errorf("a probe's span without tokentap.probe: %v", s.Attributes())
		}
		probes++
	}
	if probes < want {
		t.Errorf("%d probe spans, want at least %d", probes, want)
	}

	// Each target's counts, once both have sent want probes in this run.
	var sim, tls probe.CountsSnapshot
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c := probeVars(t)
		sim, tls = c["it-sim"], c["it-tls"]
		if sim.Sent-counted.Sent >= want && tls.Sent-countedTLS.Sent >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/debug/vars tokentap_probe after 20 s: it-sim %+v (before the run %+v), it-tls %+v (before %+v), want %d more sent by each", sim, counted, tls, countedTLS, want)
		}
	}
	// Caddy starts its apps in no set order: a first probe drawn at an
	// offset near zero may find the proxy's listener not open yet, which
	// fails it before tokentap sees it. Later ones may not fail.
	if sim.Failed-counted.Failed > 1 {
		t.Errorf("/debug/vars tokentap_probe it-sim: %+v (before the run: %+v), want at most the first failed", sim, counted)
	}
	// The HTTPS route's certificate is from Caddy's own CA (tls
	// internal), which the system does not trust: its probes complete
	// only because the prober trusts the CA Caddy runs.
	if tls.Failed-countedTLS.Failed > 1 {
		t.Errorf("/debug/vars tokentap_probe it-tls: %+v (before the run: %+v), want at most the first failed", tls, countedTLS)
	}

	// A reload: the old config's prober stops, the new one runs alone.
	loadProbeCaddyfile(t, "2s")
	waitProberGoroutines(t, before+2)

	stopped = true
	stopStatsCaddy(t)
	waitProberGoroutines(t, before)
}
