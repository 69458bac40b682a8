package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/simulator"
	"github.com/tokentap/tokentap/internal/stats"
	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

const howToGetPrometheus = "install Debian's prometheus package (2.40 or later, for native histograms) and set PROMETHEUS_BINARY to its path (.ci/run does)"

// prometheusBinary is Prometheus, from PROMETHEUS_BINARY.
func prometheusBinary(t *testing.T) string {
	t.Helper()
	return testbin.Executable(t, "PROMETHEUS_BINARY", testbin.RequireE2E, howToGetPrometheus)
}

// fleetCaddyfile is one instance of TestPrometheusFleet: /sim/* measured in
// front of its own simulator, whose speed each request sets, and Caddy's
// metrics handler on a port of its own for Prometheus, as
// examples/prometheus/README.md configures it.
const fleetCaddyfile = `{
	admin %s
	default_bind 127.0.0.1
	skip_install_trust
}

http://:%s {
	handle_path /sim/* {
		tokentap
		reverse_proxy %s
	}
}

http://:%s {
	tokentap_simulator {
		output_tokens 12
	}
}

http://:%s {
	metrics
}
`

// fleetTraffic is one model's traffic on one instance: each request's
// decode rate and time to first token drawn uniformly from these ranges,
// so that the two instances' distributions of a model differ and the
// fleet's quantiles are neither instance's.
type fleetTraffic struct {
	model            string
	tpsMin, tpsMax   float64 // tokens/s
	ttftMin, ttftMax float64 // seconds
}

// fleetRequests is how many requests each model gets on each instance: 200
// per model in the fleet, so that neighbouring ranks of a quantile are a
// fraction of a percent apart.
const fleetRequests = 100

// TestPrometheusFleet is the fleet view on an existing engine: two tokentap
// instances, with OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION
// set to base2_exponential_bucket_histogram, measure different simulator
// traffic for two models; a real Prometheus (native histograms on) scrapes
// both admin /metrics endpoints with examples/prometheus's configuration and
// rules. PromQL's histogram_quantile of the two instances' histograms summed,
// p50 and p95 of output tokens/s and of time to first token per model,
// agrees with `tokentap stats --from` of both instances within the bound
// the two resolutions give: the widest native bucket the sum kept (its
// scale) plus the sketches' 1 %, plus 1 % for the two rank conventions
// (Prometheus interpolates at q·n, the sketches take rank q·(n-1)). Then
// every query of the example's recording rules and Grafana dashboard runs
// on this Prometheus and returns a series per model.
func TestPrometheusFleet(t *testing.T) {
	bin, prom := testbin.Binary(t), prometheusBinary(t)
	root := testbin.RepoRoot(t)
	type instance struct {
		admin, proxy, sim, metrics string
		traffic                    []fleetTraffic
	}
	instances := []*instance{
		{traffic: []fleetTraffic{{"fleet-fast", 150, 250, 0.04, 0.12}, {"fleet-slow", 40, 70, 0.15, 0.40}}},
		{traffic: []fleetTraffic{{"fleet-fast", 100, 200, 0.06, 0.16}, {"fleet-slow", 30, 60, 0.20, 0.50}}},
	}
	env := append(testbin.Environ("OTEL_"),
		"OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION=base2_exponential_bucket_histogram",
		"OTEL_METRICS_EXPORTER=none", "OTEL_TRACES_EXPORTER=none")
	var targets []string
	for i, in := range instances {
		in.admin, in.proxy, in.sim, in.metrics = testbin.FreeAddr(t), testbin.FreeAddr(t), testbin.FreeAddr(t), testbin.FreeAddr(t)
		p := testbin.Start(t, testbin.Config{
			Name:      fmt.Sprintf("tokentap-%d", i+1),
			Bin:       bin,
			Caddyfile: fmt.Sprintf(fleetCaddyfile, in.admin, port(in.proxy), in.sim, port(in.sim), port(in.metrics)),
			Env:       env,
			AfterStop: func(out string) {
				if t.Failed() {
					t.Logf("tokentap-%d output:\n%s", i+1, testbin.LastLines(out, 40))
				}
			},
		})
		// The admin endpoint answers before the servers listen.
		p.WaitReady(t, 30*time.Second, "http://"+in.admin+"/config/")
		p.WaitListening(t, 30*time.Second, in.proxy, in.sim, in.metrics)
		targets = append(targets, in.metrics)
	}

	// Prometheus with the example's configuration: its targets are these
	// instances, its intervals 1 s so the test need not wait 15.
	promAddr := testbin.FreeAddr(t)
	dir := t.TempDir()
	config := readExample(t, root, "prometheus.yml")
	config = strings.Replace(config, "['tokentap-1:9180', 'tokentap-2:9180']", "['"+strings.Join(targets, "', '")+"']", 1)
	config = strings.ReplaceAll(config, "15s", "1s")
	if !strings.Contains(config, targets[0]) {
		t.Fatal("examples/prometheus/prometheus.yml no longer lists ['tokentap-1:9180', 'tokentap-2:9180'] as its targets")
	}
	writeFile(t, filepath.Join(dir, "prometheus.yml"), config)
	writeFile(t, filepath.Join(dir, "rules.yml"), readExample(t, root, "rules.yml"))
	startPrometheus(t, prom, dir, promAddr)

	// The traffic, 16 requests at a time, each with its own speed.
	type job struct {
		in *instance
		tr fleetTraffic
		i  int
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if err := fleetRequest(j.in.proxy, j.tr, j.i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	started := time.Now()
	for i := range fleetRequests {
		for _, in := range instances {
			for _, tr := range in.traffic {
				jobs <- job{in, tr, i}
			}
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	t.Logf("%d requests in %v", fleetRequests*4, time.Since(started).Round(time.Millisecond))

	// Wait until Prometheus has scraped every exchange of both instances
	// (each is recorded once its response has ended, just after the client
	// read the last byte).
	models := []string{"fleet-fast", "fleet-slow"}
	promCounts := func(name string) map[string]float64 {
		return promVector(t, promAddr, `histogram_count(sum by (gen_ai_response_model) (`+name+`))`)
	}
	waitCounts := func(name string, want func(model string) float64) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := promCounts(name)
			if got["fleet-fast"] == want("fleet-fast") && got["fleet-slow"] == want("fleet-slow") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("Prometheus counts %v points of %s per model, want %v and %v", got, name, want("fleet-fast"), want("fleet-slow"))
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	waitCounts("gen_ai_client_operation_duration_seconds", func(string) float64 { return 2 * fleetRequests })

	// tokentap's own merge of both instances.
	out, err := exec.Command(bin, "stats", "--from", instances[0].admin, "--from", instances[1].admin, "--json").Output()
	if err != nil {
		t.Fatalf("tokentap stats: %v", err)
	}
	rows := map[string]map[string]statsSummary{}
	var raw struct {
		Rows []struct {
			Model   string                  `json:"model"`
			Metrics map[string]statsSummary `json:"metrics"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatalf("tokentap stats --json: %v\n%s", err, out)
	}
	for _, r := range raw.Rows {
		rows[r.Model] = r.Metrics
	}

	for _, m := range []struct{ promName, statsName string }{
		{"tokentap_output_token_rate_per_second", "output_tokens_per_second"},
		{"tokentap_time_to_first_token_seconds", "time_to_first_token"},
	} {
		// Both sinks saw the same measurements. A stream has no rate
		// when the proxy read all its tokens at once, which a machine
		// busy with other work makes happen now and then (on a loaded
		// machine, the access log showed those streams' time to first
		// token equal to their duration); so most must have one, and the
		// count is logged.
		waitCounts(m.promName, func(model string) float64 { return float64(rows[model][m.statsName].Count) })
		for _, model := range models {
			if c := rows[model][m.statsName].Count; c < 2*fleetRequests*9/10 {
				t.Errorf("%s: %d of %d requests have a %s", model, c, 2*fleetRequests, m.statsName)
			} else if c != 2*fleetRequests {
				t.Logf("%s: %d of %d requests have a %s", model, c, 2*fleetRequests, m.statsName)
			}
		}
		widths := promBucketWidths(t, promAddr, `sum by (gen_ai_response_model) (`+m.promName+`)`)
		for _, q := range []float64{0.5, 0.95} {
			got := promVector(t, promAddr, fmt.Sprintf(`histogram_quantile(%g, sum by (gen_ai_response_model) (%s))`, q, m.promName))
			for _, model := range models {
				t.Run(fmt.Sprintf("%s p%g %s", m.statsName, 100*q, model), func(t *testing.T) {
					s, ok := rows[model][m.statsName]
					want, has := s.Quantiles[fmt.Sprintf("p%g", 100*q)]
					if !ok || !has {
						t.Fatalf("tokentap stats has no p%g of %s for %s: %+v", 100*q, m.statsName, model, rows[model])
					}
					bound := widths[model] + stats.RelativeAccuracy + 0.01
					diff := got[model]/want - 1
					t.Logf("Prometheus %.4g, tokentap stats %.4g (%+.2f %%); bound %.2f %% (widest bucket %.2f %%)",
						got[model], want, 100*diff, 100*bound, 100*widths[model])
					if math.Abs(diff) > bound {
						t.Errorf("Prometheus %.4g and tokentap stats %.4g differ by %.2f %%, want within %.2f %%", got[model], want, 100*diff, 100*bound)
					}
				})
			}
		}
	}

	// Every query of the example's rules and dashboard runs and gives each
	// model a value. Rules are evaluated every second; wait for one pass.
	for _, q := range exampleQueries(t, root) {
		t.Run("query "+q.from, func(t *testing.T) {
			deadline := time.Now().Add(15 * time.Second)
			for {
				got := promVector(t, promAddr, q.expr)
				if len(got) >= len(models) || (q.alert && len(got) == 0) {
					if !q.alert {
						for _, model := range models {
							if v, ok := got[model]; !ok || math.IsNaN(v) {
								t.Errorf("%s: no value for %s: %v", q.expr, model, got)
							}
						}
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: %d series %v, want one per model", q.expr, len(got), got)
				}
				time.Sleep(500 * time.Millisecond)
			}
		})
	}
}

// statsSummary is one metric of a `tokentap stats --json` row.
type statsSummary struct {
	Count     int64 `json:"count"`
	Quantiles map[string]float64
}

func (s *statsSummary) UnmarshalJSON(b []byte) error {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	s.Quantiles = map[string]float64{}
	for k, v := range all {
		switch {
		case k == "count":
			if err := json.Unmarshal(v, &s.Count); err != nil {
				return err
			}
		case strings.HasPrefix(k, "p"):
			var f float64
			if err := json.Unmarshal(v, &f); err != nil {
				return err
			}
			s.Quantiles[k] = f
		}
	}
	return nil
}

// fleetRequest sends request i of tr's traffic to the proxy at addr and
// reads the stream to its end. Its speed is drawn from tr's ranges with a
// generator seeded by the model and i, so runs repeat.
func fleetRequest(addr string, tr fleetTraffic, i int) error {
	rng := rand.New(rand.NewPCG(uint64(i), uint64(len(tr.model))+uint64(tr.tpsMin)))
	tps := tr.tpsMin + rng.Float64()*(tr.tpsMax-tr.tpsMin)
	ttft := tr.ttftMin + rng.Float64()*(tr.ttftMax-tr.ttftMin)
	body := `{"model":"` + tr.model + `","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	req, err := http.NewRequest("POST", "http://"+addr+"/sim/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(simulator.HeaderTokensPerSecond, strconv.FormatFloat(tps, 'f', 3, 64))
	req.Header.Set(simulator.HeaderTimeToFirstToken, strconv.FormatFloat(1000*ttft, 'f', 3, 64)+"ms")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		return fmt.Errorf("%s request %d: status %d, %v: %.200s", tr.model, i, resp.StatusCode, err, b)
	}
	return nil
}

// startPrometheus runs Prometheus on dir/prometheus.yml with native
// histograms on, its data in dir, until the end of the test.
func startPrometheus(t *testing.T, bin, dir, addr string) {
	t.Helper()
	var out testbin.Buffer
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--enable-feature=native-histograms")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting Prometheus: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("Prometheus output:\n%s", testbin.LastLines(out.String(), 40))
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus not ready on %s: %v\n%s", addr, err, testbin.LastLines(out.String(), 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// promQuery runs an instant query and returns its result's items.
func promQuery(t *testing.T, addr, query string) []promSample {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		t.Fatalf("query %s: %v", query, err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("query %s: status %q, error %q, %v", query, r.Status, r.Error, err)
	}
	return r.Data.Result
}

// promSample is one item of a vector: a float value or a native histogram.
type promSample struct {
	Metric    map[string]string `json:"metric"`
	Value     []any             `json:"value"`
	Histogram []json.RawMessage `json:"histogram"`
}

// promVector runs an instant query whose items are floats, by model.
func promVector(t *testing.T, addr, query string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range promQuery(t, addr, query) {
		if len(s.Value) != 2 {
			continue
		}
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			t.Fatalf("query %s: value %v", query, s.Value)
		}
		out[s.Metric["gen_ai_response_model"]] = v
	}
	return out
}

// promBucketWidths runs an instant query whose items are native histograms
// and returns, by model, the relative width (upper/lower - 1) of its widest
// populated bucket: how far a quantile interpolated in it can be off.
func promBucketWidths(t *testing.T, addr, query string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range promQuery(t, addr, query) {
		if len(s.Histogram) != 2 {
			t.Fatalf("query %s: %s is not a native histogram (is native-histograms on, and the aggregation exponential?)", query, s.Metric)
		}
		var h struct {
			Buckets [][]any `json:"buckets"`
		}
		if err := json.Unmarshal(s.Histogram[1], &h); err != nil {
			t.Fatal(err)
		}
		widest := 0.0
		for _, b := range h.Buckets {
			lo, _ := strconv.ParseFloat(fmt.Sprint(b[1]), 64)
			hi, _ := strconv.ParseFloat(fmt.Sprint(b[2]), 64)
			if lo > 0 {
				widest = max(widest, hi/lo-1)
			}
		}
		out[s.Metric["gen_ai_response_model"]] = widest
	}
	return out
}

// exampleQuery is a PromQL expression of examples/prometheus and where it
// is written.
type exampleQuery struct {
	from, expr string
	alert      bool // an alert's condition, empty while all is well
}

// exampleQueries reads every expression of the example's rules and of its
// Grafana dashboard; the dashboard's $__rate_interval becomes 1m, as
// Grafana would make it at a 15 s scrape interval.
func exampleQueries(t *testing.T, root string) []exampleQuery {
	t.Helper()
	var qs []exampleQuery
	rules := readExample(t, root, "rules.yml")
	lines := strings.Split(rules, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "expr:") {
			continue
		}
		name, alert := "", false
		for j := i - 1; j >= 0 && name == ""; j-- {
			p := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(lines[j]), "- "))
			if v, ok := strings.CutPrefix(p, "record:"); ok {
				name = strings.TrimSpace(v)
			} else if v, ok := strings.CutPrefix(p, "alert:"); ok {
				name, alert = strings.TrimSpace(v), true
			}
		}
		expr := strings.TrimSpace(strings.TrimPrefix(l, "expr:"))
		qs = append(qs, exampleQuery{"rules.yml " + name, expr, alert})
		if !alert {
			// The recorded series exists too.
			qs = append(qs, exampleQuery{"rules.yml " + name + " (recorded)", name, false})
		}
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(readExample(t, root, "grafana-dashboard.json")), &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			qs = append(qs, exampleQuery{"grafana-dashboard.json " + p.Title, strings.ReplaceAll(tg.Expr, "$__rate_interval", "1m"), false})
		}
	}
	if len(qs) < 8 {
		t.Fatalf("%d queries in examples/prometheus, want the rules' and the dashboard's", len(qs))
	}
	return qs
}

func readExample(t *testing.T, root, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "examples", "prometheus", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// port is the port of a host:port address.
func port(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }
