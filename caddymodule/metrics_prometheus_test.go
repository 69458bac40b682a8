package caddymodule

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/simulator"
)

// Ports of the Prometheus integration test: admin 2330, proxy 9330, the
// simulator 9332. They differ from integration_test.go's, so this test
// runs its own Caddy (caddytest starts one per admin port).
const (
	promAdmin   = "localhost:2330"
	promProxy   = "localhost:9330"
	promSimPort = "9332"
)

// promConfig is a config with the tokentap handler in front of the
// simulator, a label from a request header, a second tokentap handler (two
// handlers share one config's registry), and Caddy's metrics handler on the
// proxy's port (it serves the same registry as the admin /metrics, with
// OpenMetrics negotiation). stall_threshold only makes each reload a
// different config, since Caddy ignores a load of the config it runs.
const promConfig = `{
	skip_install_trust
	admin ` + promAdmin + `
	http_port 9330
	https_port 9331
	grace_period 1ns
}

http://` + promProxy + ` {
	handle /metrics {
		metrics
	}
	handle_path /sim/* {
		tokentap {
			stall_threshold %dms
			label team {http.request.header.X-Team}
		}
		reverse_proxy 127.0.0.1:` + promSimPort + `
	}
	handle_path /other/* {
		tokentap
		reverse_proxy 127.0.0.1:` + promSimPort + `
	}
}

http://:` + promSimPort + ` {
	bind 127.0.0.1
	tokentap_simulator {
		time_to_first_token 20ms
		tokens_per_second 500
		output_tokens 10
	}
}
`

// promModel is the request model of this test's exchanges, so that its
// series are told apart from other tests' in the shared pipeline.
const promModel = "prom-model"

// TestPrometheusThroughCaddy runs tokentap inside a real Caddy in front of
// the simulator and scrapes Caddy's admin /metrics: the histograms are
// there with their labels and exemplars; after several config reloads they
// are still there once, without scrape errors, and their counts continue.
func TestPrometheusThroughCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Caddy")
	}
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{AdminPort: 2330, TestRequestTimeout: 30 * time.Second})
	load := func(generation int) {
		t.Helper()
		tester.InitServer(fmt.Sprintf(promConfig, 1000+generation), "caddyfile")
		waitProxyListening(t, "http://"+promProxy+"/")
	}
	load(0)
	before := len(integrationSpans.Ended())
	send := func(usage bool) {
		t.Helper()
		body := fmt.Sprintf(`{"model":%q,"stream":true,"stream_options":{"include_usage":%v},"messages":[{"role":"user","content":"hi"}]}`, promModel, usage)
		req, err := http.NewRequest("POST", "http://"+promProxy+"/sim/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Team", "search")
		req.Header.Set(simulator.HeaderOutputTokens, "12")
		resp, err := tester.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.HasSuffix(b, []byte("data: [DONE]\n\n")) {
			t.Fatalf("stream: %v, %q", err, b)
		}
	}
	// Three exchanges with usage, one estimated.
	for range 3 {
		send(true)
	}
	send(false)
	spans := waitSpans(t, integrationSpans, before+4)
	traces := map[string]bool{}
	for _, s := range spans[before:] {
		traces[s.SpanContext().TraceID().String()] = true
	}

	reported := map[string]string{
		"gen_ai_operation_name": "chat",
		"gen_ai_provider_name":  "openai",
		"gen_ai_request_model":  promModel,
		"server_address":        "127.0.0.1",
		"server_port":           promSimPort,
		"tokentap_usage_source": "reported",
		"tokentap_label_team":   "search",
		"otel_scope_name":       otelexport.InstrumentationName,
	}
	estimated := promWithLabel(reported, "tokentap_usage_source", "estimated")
	// rated counts this test's exchanges that had a decode rate, by usage
	// source: a stream whose tokens all arrive in one read (a busy machine
	// can coalesce them) has none, as its span says.
	rated := func(source string) uint64 {
		var n uint64
		for _, s := range integrationSpans.Ended()[before:] {
			a := attrs(s)
			if a["gen_ai.request.model"].AsString() == promModel && a[attrUsageSource].AsString() == source {
				if _, ok := a[attrOutputTokensPerSecond]; ok {
					n++
				}
			}
		}
		return n
	}
	check := func(t *testing.T, mfs map[string]*dto.MetricFamily, scale uint64) {
		t.Helper()
		for _, tt := range []struct {
			family string
			labels map[string]string
			count  uint64
		}{
			{"gen_ai_client_operation_duration_seconds", reported, 3 * scale},
			{"gen_ai_client_operation_duration_seconds", estimated, 1 * scale},
			{"gen_ai_client_operation_time_to_first_chunk_seconds", reported, 3 * scale},
			// 12 tokens: a role chunk, 12 content chunks, the finish
			// chunk, the usage chunk and [DONE]: 15 gaps per stream.
			{"gen_ai_client_operation_time_per_output_chunk_seconds", reported, 3 * 15 * scale},
			{"gen_ai_client_token_usage", promWithLabel(reported, "gen_ai_token_type", "input"), 3 * scale},
			{"gen_ai_client_token_usage", promWithLabel(reported, "gen_ai_token_type", "output"), 3 * scale},
			{"tokentap_time_to_first_token_seconds", reported, 3 * scale},
			{"tokentap_time_to_first_token_seconds", estimated, 1 * scale},
			{"tokentap_output_token_rate_per_second", reported, rated("reported")},
			{"tokentap_output_token_rate_per_second", estimated, rated("estimated")},
		} {
			if tt.count == 0 {
				continue
			}
			m := promSeries(mfs[tt.family], tt.labels)
			if m == nil {
				t.Errorf("%s: no series with %v", tt.family, tt.labels)
				continue
			}
			if mfs[tt.family].GetType() != dto.MetricType_HISTOGRAM {
				t.Errorf("%s is a %v", tt.family, mfs[tt.family].GetType())
			}
			if got := m.GetHistogram().GetSampleCount(); got != tt.count {
				t.Errorf("%s %v: count %d, want %d", tt.family, tt.labels, got, tt.count)
			}
		}
		// The estimate never reaches the token usage histogram.
		if m := promSeries(mfs["gen_ai_client_token_usage"], promWithLabel(estimated, "gen_ai_token_type", "output")); m != nil {
			t.Errorf("estimated output tokens in gen_ai.client.token.usage: %v", m)
		}
	}

	t.Run("admin /metrics, text", func(t *testing.T) {
		check(t, promScrapeText(t, "http://"+promAdmin+"/metrics", ""), 1)
	})
	t.Run("admin /metrics, protobuf with exemplars", func(t *testing.T) {
		mfs := promScrapeProto(t, "http://"+promAdmin+"/metrics")
		check(t, mfs, 1)
		m := promSeries(mfs["gen_ai_client_operation_duration_seconds"], reported)
		if m == nil {
			t.FailNow()
		}
		n := 0
		for _, b := range m.GetHistogram().GetBucket() {
			if e := b.GetExemplar(); e != nil {
				n++
				id := promLabel(e.GetLabel(), "trace_id")
				if !traces[id] {
					t.Errorf("exemplar trace_id %q is not one of this test's spans %v", id, traces)
				}
				if e.GetValue() > b.GetUpperBound() {
					t.Errorf("exemplar %v in the bucket up to %v", e.GetValue(), b.GetUpperBound())
				}
			}
		}
		if n == 0 {
			t.Error("no exemplars")
		}
	})
	t.Run("metrics handler, OpenMetrics with exemplars", func(t *testing.T) {
		body := promScrape(t, "http://"+promProxy+"/metrics", "application/openmetrics-text;version=1.0.0")
		found := false
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "gen_ai_client_operation_duration_seconds_bucket{") &&
				strings.Contains(line, `gen_ai_request_model="`+promModel+`"`) && strings.Contains(line, " # {") {
				found = true
				for id := range traces {
					if strings.Contains(line, `trace_id="`+id+`"`) {
						return
					}
				}
				t.Errorf("exemplar of another trace: %s", line)
			}
		}
		if !found {
			t.Errorf("no bucket with an exemplar in:\n%.3000s", body)
		}
	})

	// Reloads: each makes a new registry; the metrics must be on it once,
	// and continue from where they were.
	for gen := 1; gen <= 3; gen++ {
		load(gen)
		for range 3 {
			send(true)
		}
		send(false)
		waitSpans(t, integrationSpans, before+4*(gen+1))
		t.Run(fmt.Sprintf("after reload %d", gen), func(t *testing.T) {
			mfs := promScrapeText(t, "http://"+promAdmin+"/metrics", "")
			check(t, mfs, uint64(gen+1))
			// Caddy's own metrics are still there beside tokentap's.
			if mfs["caddy_config_last_reload_successful"] == nil {
				t.Error("Caddy's metrics are gone")
			}
		})
	}
}

// waitProxyListening waits until a freshly loaded config's listener accepts.
func waitProxyListening(t *testing.T, url string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Caddy does not answer on %s: %v", url, err)
		}
	}
}

func promScrape(t *testing.T, url, accept string) string {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	// Caddy answers 500 when gathering fails, for example on duplicate
	// series from a collector registered twice.
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d: %.2000s", url, resp.StatusCode, b)
	}
	return string(b)
}

// promScrapeText parses the text exposition format; the parser rejects a
// family that appears twice.
func promScrapeText(t *testing.T, url, accept string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(promScrape(t, url, accept)))
	if err != nil {
		t.Fatalf("parsing %s: %v", url, err)
	}
	return mfs
}

// promScrapeProto asks for the protobuf exposition format, which Caddy's admin
// endpoint negotiates and which carries exemplars.
func promScrapeProto(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d", url, resp.StatusCode)
	}
	format := expfmt.ResponseFormat(resp.Header)
	if format.FormatType() != expfmt.TypeProtoDelim {
		t.Fatalf("%s answered %s, want protobuf", url, format)
	}
	dec := expfmt.NewDecoder(resp.Body, format)
	mfs := map[string]*dto.MetricFamily{}
	for {
		mf := new(dto.MetricFamily)
		if err := dec.Decode(mf); errors.Is(err, io.EOF) {
			return mfs
		} else if err != nil {
			t.Fatal(err)
		}
		if mfs[mf.GetName()] != nil {
			t.Errorf("family %s twice", mf.GetName())
		}
		mfs[mf.GetName()] = mf
	}
}

// promSeries returns the one series of mf whose labels include want, and
// nil when there is none.
func promSeries(mf *dto.MetricFamily, want map[string]string) *dto.Metric {
	for _, m := range mf.GetMetric() {
		ok := true
		for k, v := range want {
			if promLabel(m.GetLabel(), k) != v {
				ok = false
				break
			}
		}
		// A series with a label beyond want (gen_ai_token_type) is a
		// different one, unless want names it.
		if ok && (want["gen_ai_token_type"] != "" || promLabel(m.GetLabel(), "gen_ai_token_type") == "") {
			return m
		}
	}
	return nil
}

func promLabel(labels []*dto.LabelPair, name string) string {
	for _, l := range labels {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func promWithLabel(m map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(m)+1)
	for kk, vv := range m {
		out[kk] = vv
	}
	out[k] = v
	return out
}
