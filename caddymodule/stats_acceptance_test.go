package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokentap/tokentap/simulator"
	"github.com/tokentap/tokentap/stats"
)

// The stats tests' ports. The first instance runs in the test process, the
// second in a child process (a Caddy process holds one config).
const (
	statsAdmin1   = "localhost:2310"
	statsProxy1   = "127.0.0.1:9310"
	statsSim1     = "127.0.0.1:9311"
	statsAdmin2   = "localhost:2311"
	statsProxy2   = "127.0.0.1:9312"
	statsSim2     = "127.0.0.1:9313"
	statsHTTPS    = 9319
	statsInstance = "TOKENTAP_STATS_INSTANCE"
)

// acceptanceModel is a simulated model of known speed. Each request asks
// for its own rate, spread evenly over ±20 % of the model's
// (Tokentap-Sim-Tokens-Per-Second), and the simulator jitters every
// interval by up to ±20 %, deterministically; the plan of each request
// (simulator.Handler.Plan) is the ground truth. Streams of about 10 s make
// the measured rate, (n-1)/(last-first), robust to 100 ms of delay of the
// first or last token (1 %), which leaves room for the sketch's 1 %.
type acceptanceModel struct {
	name   string
	rate   float64
	tokens int
}

// acceptanceModels are attempt n's models: model A at 40 tokens/s and model
// B at 120, named afresh for each attempt so that its rows hold only its
// own requests.
func acceptanceModels(attempt int) []acceptanceModel {
	return []acceptanceModel{
		{fmt.Sprintf("accept-a-%d", attempt), 40, 400},
		{fmt.Sprintf("accept-b-%d", attempt), 120, 1200},
	}
}

const (
	// acceptancePerModel is the number of requests per model and attempt,
	// split evenly over the two instances.
	acceptancePerModel = 12
	// acceptanceAttempts bounds the attempts (see TestStatsAcceptance).
	acceptanceAttempts = 3
)

// acceptanceSimulator is the simulator's config, for Caddy and for the
// ground truth alike.
func acceptanceSimulator() *simulator.Handler {
	h := &simulator.Handler{
		Profile: simulator.Profile{TimeToFirstToken: caddy.Duration(300 * time.Millisecond), Jitter: 0.2},
		Models:  map[string]simulator.Profile{},
	}
	for attempt := 1; attempt <= acceptanceAttempts; attempt++ {
		for _, m := range acceptanceModels(attempt) {
			h.Models[m.name] = simulator.Profile{TokensPerSecond: m.rate, OutputTokens: m.tokens}
		}
	}
	return h
}

// statsCaddyConfig is an instance's JSON config: tokentap with a label in
// front of reverse_proxy, and the simulator.
func statsCaddyConfig(t *testing.T, admin, proxy, sim string) []byte {
	t.Helper()
	simJSON, err := json.Marshal(acceptanceSimulator())
	if err != nil {
		t.Fatal(err)
	}
	var simHandler map[string]any
	_ = json.Unmarshal(simJSON, &simHandler)
	simHandler["handler"] = "tokentap_simulator"
	cfg := map[string]any{
		"admin":   map[string]any{"listen": admin},
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{"level": "ERROR"}}},
		"apps": map[string]any{"http": map[string]any{
			"https_port":   statsHTTPS,
			"grace_period": int64(time.Second),
			"servers": map[string]any{
				"proxy": map[string]any{
					"listen":          []string{proxy},
					"automatic_https": map[string]any{"disable": true},
					"routes": []any{map[string]any{"handle": []any{
						map[string]any{"handler": "tokentap", "labels": map[string]string{"suite": "{http.request.header.X-Suite}"}},
						map[string]any{"handler": "reverse_proxy", "upstreams": []any{map[string]string{"dial": sim}}},
					}}},
				},
				"simulator": map[string]any{
					"listen":          []string{sim},
					"automatic_https": map[string]any{"disable": true},
					"routes":          []any{map[string]any{"handle": []any{simHandler}}},
				},
			},
		}},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startStatsCaddy runs an instance in this process until the test ends.
func startStatsCaddy(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a real Caddy")
	}
	if err := caddy.Load(statsCaddyConfig(t, statsAdmin1, statsProxy1, statsSim1), true); err != nil {
		t.Fatalf("loading the config (ports %s, %s, %s): %v", statsAdmin1, statsProxy1, statsSim1, err)
	}
	t.Cleanup(func() { stopStatsCaddy(t) })
	waitAnswers(t, "http://"+statsAdmin1+"/tokentap/stats")
	waitAnswers(t, "http://"+statsProxy1+"/")
}

// startStatsInstance runs a second instance in a child process: this test
// binary, running only TestStatsInstanceProcess. The child stops when its
// stdin closes, which also happens if this process dies.
func startStatsInstance(t *testing.T) {
	t.Helper()
	// os.Executable, not os.Args[0]: caddytest rewrites os.Args when it
	// starts Caddy in this process.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "-test.run=^TestStatsInstanceProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), statsInstance+"="+string(statsCaddyConfig(t, statsAdmin2, statsProxy2, statsSim2)))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("second instance's output:\n%s", lastLines(out.String(), 40))
		}
	})
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := client.Get("http://" + statsAdmin2 + "/tokentap/stats")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("the second instance exited: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second instance's admin API (%s) does not answer: %v\n%s", statsAdmin2, err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitAnswers(t, "http://"+statsProxy2+"/")
}

// TestStatsInstanceProcess is the second instance of TestStatsAcceptance,
// run in a child process; on its own it does nothing.
func TestStatsInstanceProcess(t *testing.T) {
	cfg := os.Getenv(statsInstance)
	if cfg == "" {
		t.Skip("the second instance of TestStatsAcceptance, run by it in a child process")
	}
	if err := caddy.Load([]byte(cfg), true); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = caddy.Stop()
}

// TestAdminAPIThroughCaddy: Caddy loads admin.api.tokentap by itself, and
// its routes answer on the real admin endpoint with the statuses of Caddy's
// own admin API.
func TestAdminAPIThroughCaddy(t *testing.T) {
	startStatsCaddy(t)
	// One exchange, so the stats have a row.
	resp, err := http.Post("http://"+statsProxy1+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"admin-api-test","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	admin := "http://" + statsAdmin1
	tests := []struct {
		name       string
		method     string
		path       string
		wantStatus int
		wantBody   string
	}{
		{"stats", "GET", "/tokentap/stats?window=1m", 200, `"model":"admin-api-test"`},
		{"sketches", "GET", "/tokentap/stats/sketches", 200, `"version":1`},
		{"bad window", "GET", "/tokentap/stats?window=1d", 400, `{"error":"window \"1d\": use 1m, 5m or 1h"}`},
		{"wrong method", "PUT", "/tokentap/stats/sketches", 405, `"error":"method PUT not allowed`},
		{"page", "GET", "/tokentap/", 200, "<!doctype html>"},
		{"page without the slash", "GET", "/tokentap", 200, "<!doctype html>"},
		{"Caddy's own API still answers", "GET", "/config/admin/listen", 200, statsAdmin1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, admin+tt.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || !strings.Contains(string(b), tt.wantBody) {
				t.Errorf("%d %s, want %d with %s", resp.StatusCode, lastLines(string(b), 5), tt.wantStatus, tt.wantBody)
			}
		})
	}
}

// acceptanceRequest is one request of the acceptance traffic and its
// ground truth.
type acceptanceRequest struct {
	model    string
	instance int
	body     string
	header   http.Header
	truth    float64 // the plan's decode rate, tokens/s
}

// acceptanceTraffic plans the requests: per model, rates spread evenly
// over ±20 % of its speed, assigned to the two instances alternately.
func acceptanceTraffic(t *testing.T, models []acceptanceModel) []acceptanceRequest {
	t.Helper()
	sim := acceptanceSimulator()
	var reqs []acceptanceRequest
	for i := 0; i < acceptancePerModel; i++ {
		for _, m := range models {
			// Spread the rates, then deal them out of order so that each
			// instance gets slow and fast requests alike.
			k := (i * 5) % acceptancePerModel
			rate := m.rate * (0.8 + 0.4*float64(k)/(acceptancePerModel-1))
			r := acceptanceRequest{
				model:    m.name,
				instance: i % 2,
				body: fmt.Sprintf(`{"model":%q,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"acceptance request %d"}]}`,
					m.name, i),
				header: http.Header{
					"Content-Type":                  {"application/json"},
					"X-Suite":                       {"acceptance"},
					simulator.HeaderTokensPerSecond: {strconv.FormatFloat(rate, 'f', 3, 64)},
				},
			}
			plan, err := sim.Plan([]byte(r.body), r.header)
			if err != nil {
				t.Fatal(err)
			}
			r.truth = plan.DecodeRate()
			reqs = append(reqs, r)
		}
	}
	return reqs
}

// truthQuantile is the value at rank q*(n-1) of the sorted rates, the rank
// the sketches report (within their accuracy).
func truthQuantile(rates []float64, q float64) float64 {
	s := append([]float64(nil), rates...)
	sort.Float64s(s)
	return s[int(q*float64(len(s)-1))]
}

// TestStatsAcceptance is the acceptance test: the simulator serves
// model A at ~40 tokens/s and model B at ~120 tokens/s through two tokentap
// instances, and `tokentap stats` reports each model's p50 and p95 of
// output tokens/s within 2 % of the simulator's ground truth, for each
// instance alone and for the two merged, which is then the view of one
// instance that saw all the traffic.
//
// A loaded machine (and the race detector makes every event cost ten times
// more) can hold the simulator or the proxy back for a few hundred
// milliseconds, which moves a stream's first or last token: noise in what
// is measured, not an error in the measuring. So, like TestTimingAccuracy,
// the check passes if one of three attempts, each with fresh models and
// each logged, is within 2 %; an error of tokentap's own fails them all.
// Counts and the rows' structure must be right in every attempt.
func TestStatsAcceptance(t *testing.T) {
	startStatsCaddy(t)
	startStatsInstance(t)
	client := &http.Client{Timeout: 60 * time.Second}
	// A first request through each instance dials its upstream and runs
	// whatever is set up lazily, outside the measured traffic.
	for _, p := range []string{statsProxy1, statsProxy2} {
		resp, err := client.Post("http://"+p+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"warm-up","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	var models []acceptanceModel
	var outOfBounds []string
	for attempt := 1; attempt <= acceptanceAttempts; attempt++ {
		models = acceptanceModels(attempt)
		outOfBounds = acceptanceRun(t, client, models)
		if len(outOfBounds) == 0 || t.Failed() {
			break
		}
		t.Logf("attempt %d of %d out of bounds:\n\t%s", attempt, acceptanceAttempts, strings.Join(outOfBounds, "\n\t"))
	}
	for _, f := range outOfBounds {
		t.Error(f)
	}

	t.Run("table, fastest first", func(t *testing.T) {
		out, err := runStatsCommand(t, "--from", statsAdmin1, "--from", statsAdmin2, "--sort", "-tps_p50")
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 1 && (f[1] == models[0].name || f[1] == models[1].name) {
				order = append(order, f[1])
				if !strings.Contains(l, "suite=acceptance") {
					t.Errorf("row without its label: %s", l)
				}
			}
		}
		if want := []string{models[1].name, models[0].name}; !slices.Equal(order, want) {
			t.Errorf("rows %v, want %v (120 tokens/s before 40)\n%s", order, want, out)
		}
		t.Logf("tokentap stats --sort -tps_p50:\n%s", out)
	})
}

// acceptanceRun sends one attempt's traffic and checks the views of each
// instance and of both merged. Wrong counts fail t; quantiles out of
// bounds are returned.
func acceptanceRun(t *testing.T, client *http.Client, models []acceptanceModel) (outOfBounds []string) {
	t.Helper()
	reqs := acceptanceTraffic(t, models)
	proxies := []string{statsProxy1, statsProxy2}
	// The requests start 100 ms apart: 24 streams set up in the same
	// instant on a loaded machine delay their first tokens, and only
	// theirs, which would read as a faster decode rate. Spread, they all
	// run together for most of their 10 s.
	var wg sync.WaitGroup
	errs := make(chan error, len(reqs))
	for i, r := range reqs {
		if i > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		wg.Go(func() {
			req, _ := http.NewRequest("POST", "http://"+proxies[r.instance]+"/v1/chat/completions", strings.NewReader(r.body))
			req.Header = r.header.Clone()
			resp, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
				errs <- fmt.Errorf("%s: status %d, %v", r.model, resp.StatusCode, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// The views: each instance alone, and both merged.
	views := []struct {
		name     string
		args     []string
		instance int // -1: both
	}{
		{"first instance", []string{"--address", statsAdmin1}, 0},
		{"second instance", []string{"--address", statsAdmin2}, 1},
		{"both merged", []string{"--from", statsAdmin1, "--from", statsAdmin2}, -1},
	}
	for _, v := range views {
		want := acceptancePerModel / 2
		if v.instance < 0 {
			want = acceptancePerModel
		}
		rep := acceptanceReport(t, v.args, models, want)
		for _, m := range models {
			var truth []float64
			for _, r := range reqs {
				if r.model == m.name && (v.instance < 0 || r.instance == v.instance) {
					truth = append(truth, r.truth)
				}
			}
			row := acceptanceRow(t, rep, m.name)
			tps := row.Metrics.OutputTokensPerSecond
			if row.Requests != int64(len(truth)) || tps.Count != int64(len(truth)) || row.Errors != 0 {
				t.Errorf("%s, %s: %d requests, %d rates, %d errors; want %d requests with a rate each",
					v.name, m.name, row.Requests, tps.Count, row.Errors, len(truth))
			}
			if out := row.Metrics.OutputTokens.Quantiles["p50"]; math.Abs(out-float64(m.tokens))/float64(m.tokens) > stats.RelativeAccuracy {
				t.Errorf("%s, %s: output tokens p50 %v, want %d", v.name, m.name, out, m.tokens)
			}
			for _, q := range []float64{0.5, 0.95} {
				name := stats.QuantileName(q)
				want := truthQuantile(truth, q)
				got, ok := tps.Quantiles[name]
				t.Logf("%s, %s tokens/s %s: reported %.3f, ground truth %.3f (%+.2f%%)", v.name, m.name, name, got, want, 100*(got-want)/want)
				if !ok || math.Abs(got-want)/want > 0.02 {
					outOfBounds = append(outOfBounds, fmt.Sprintf("%s, %s tokens/s %s = %v, want %v within 2%%", v.name, m.name, name, got, want))
				}
			}
		}
	}
	return outOfBounds
}

// acceptanceReport runs `tokentap stats --json` with args until both
// models have want requests each (a request is recorded when
// its handler returns, a moment after the client has read the last byte).
func acceptanceReport(t *testing.T, args []string, models []acceptanceModel, want int) *stats.Report {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := runStatsCommand(t, append(args, "--json", "--window", "5m")...)
		if err != nil {
			t.Fatal(err)
		}
		var rep stats.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		complete := true
		for _, m := range models {
			r := findAcceptanceRow(&rep, m.name)
			complete = complete && r != nil && r.Requests >= int64(want)
		}
		if complete || time.Now().After(deadline) {
			return &rep
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func findAcceptanceRow(rep *stats.Report, model string) *stats.ReportRow {
	for i := range rep.Rows {
		if r := &rep.Rows[i]; r.Model == model && r.Labels["suite"] == "acceptance" {
			return r
		}
	}
	return nil
}

func acceptanceRow(t *testing.T, rep *stats.Report, model string) *stats.ReportRow {
	t.Helper()
	r := findAcceptanceRow(rep, model)
	if r == nil {
		b, _ := json.Marshal(rep)
		t.Fatalf("no row for %s with suite=acceptance: %s", model, b)
	}
	return r
}

// stopStatsCaddy stops the running config and waits until its tokentap
// handlers have released the shared TracerProvider, so that the next test
// starts from a process without a config.
func stopStatsCaddy(t *testing.T) {
	t.Helper()
	if err := caddy.Stop(); err != nil {
		t.Errorf("stopping Caddy: %v", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		sharedTracer.mu.Lock()
		refs := sharedTracer.refs
		sharedTracer.mu.Unlock()
		if refs == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d TracerProvider references left after stopping Caddy", refs)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
