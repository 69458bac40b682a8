package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// The addresses of TestCollector, in this test's ranges (HTTP 9340-9344,
// admin 2340-2344, Collector and Jaeger 14300-14399). The HTTP ports are
// TestJaeger's too: the tests of a package run one after another.
const (
	collectorTestLBPort        = "9340"
	collectorTestSimulatorPort = "9341"
	collectorTestAPort         = "9342"
	collectorTestBPort         = "9343"
	collectorTestLBAdmin       = "127.0.0.1:2341"
	collectorTestAAdmin        = "127.0.0.1:2342"
	collectorTestBAdmin        = "127.0.0.1:2343"
	collectorTestOTLPGRPC      = "127.0.0.1:14327"
	collectorTestOTLPHTTP      = "127.0.0.1:14328"
	collectorTestHealth        = "127.0.0.1:14334"
	collectorTestPrometheus    = "127.0.0.1:14389"
	collectorTestJaegerGRPC    = "127.0.0.1:14337"
	collectorTestJaegerHTTP    = "127.0.0.1:14338"
	collectorTestQueryHTTP     = "127.0.0.1:14396"
	collectorTestQueryGRPC     = "127.0.0.1:14395"
	collectorTestJaegerHealth  = "127.0.0.1:14343"

	collectorTestService = "tokentap-fanin"
)

// TestCollector runs examples/collector/run.sh: two tokentap instances
// behind a Caddy load balancer, exporting to one OpenTelemetry Collector
// (built from test/tools/otelcol) that fans out to Jaeger and to a Prometheus
// endpoint. Every request must have its span in Jaeger, from one instance
// or the other, both instances must have served, and the Collector's
// Prometheus counts per instance and operation must equal what Jaeger holds:
// the two branches of the fan-out agree.
func TestCollector(t *testing.T) {
	jaeger, otelcol, tokentap := jaegerBinary(t), otelcolBinary(t), testbin.Binary(t)
	root := testbin.RepoRoot(t)
	addrs := []string{"127.0.0.1:" + collectorTestLBPort, "127.0.0.1:" + collectorTestSimulatorPort,
		"127.0.0.1:" + collectorTestAPort, "127.0.0.1:" + collectorTestBPort,
		collectorTestLBAdmin, collectorTestAAdmin, collectorTestBAdmin,
		collectorTestOTLPGRPC, collectorTestOTLPHTTP, collectorTestHealth, collectorTestPrometheus,
		collectorTestJaegerGRPC, collectorTestJaegerHTTP, collectorTestQueryHTTP, collectorTestQueryGRPC, collectorTestJaegerHealth}
	testbin.RequireFree(t, addrs...)
	t.Cleanup(func() { testbin.WaitFree(t, jaegerPortFreeTimeout, addrs...) })

	start := time.Now()
	run := startJaegerScript(t, root, filepath.Join(root, "examples", "collector", "run.sh"),
		"JAEGER_BINARY="+jaeger, "OTELCOL_BINARY="+otelcol, "TOKENTAP_BINARY="+tokentap,
		"LB_PORT="+collectorTestLBPort, "LB_ADMIN="+collectorTestLBAdmin,
		"SIMULATOR_PORT="+collectorTestSimulatorPort,
		"TOKENTAP_A_PORT="+collectorTestAPort, "TOKENTAP_A_ADMIN="+collectorTestAAdmin,
		"TOKENTAP_B_PORT="+collectorTestBPort, "TOKENTAP_B_ADMIN="+collectorTestBAdmin,
		"OTELCOL_OTLP_GRPC="+collectorTestOTLPGRPC, "OTELCOL_OTLP_HTTP="+collectorTestOTLPHTTP,
		"OTELCOL_HEALTH="+collectorTestHealth, "PROMETHEUS_ENDPOINT="+collectorTestPrometheus,
		"JAEGER_OTLP_GRPC="+collectorTestJaegerGRPC, "JAEGER_OTLP_HTTP="+collectorTestJaegerHTTP,
		"JAEGER_QUERY_HTTP="+collectorTestQueryHTTP, "JAEGER_QUERY_GRPC="+collectorTestQueryGRPC,
		"JAEGER_HEALTH="+collectorTestJaegerHealth,
		"OTEL_SERVICE_NAME="+collectorTestService,
		"OTEL_BSP_SCHEDULE_DELAY=200",
	)
	run.waitOutput(t, "run.sh: ready")

	// Two operations, so that the counts are checked per operation too
	// (three of each, in a row: with round robin over two instances, each
	// instance serves both); each request in a trace of its own, so that
	// each is found by id.
	requests := []struct{ model, path, body string }{
		{"fanin-chat", "/v1/chat/completions", `{"model":"fanin-chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`},
		{"fanin-messages", "/v1/messages", `{"model":"fanin-messages","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`},
	}
	const rounds = 3
	client := &http.Client{Timeout: 30 * time.Second}
	type sent struct{ traceID, parentID, spanName string }
	var all []sent
	for _, r := range requests {
		for range rounds {
			tr := testbin.NewTrace()
			s := sent{traceID: tr.ID, parentID: tr.Parent, spanName: "chat " + r.model}
			req, _ := http.NewRequest("POST", "http://127.0.0.1:"+collectorTestLBPort+"/sim"+r.path, strings.NewReader(r.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("traceparent", tr.Traceparent())
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("POST %s through the load balancer: status %d, %v\n%s", r.path, res.StatusCode, err, body)
			}
			all = append(all, s)
		}
	}

	// Jaeger's branch: each request's span, by the trace id its
	// traceparent gave, from one of the two instances.
	q := newJaegerQuery(collectorTestQueryHTTP)
	perInstance := map[string]map[string]int{} // instance -> span name -> spans
	for _, s := range all {
		spans := pollJaeger(t, "trace "+s.traceID, func() ([]jaegerSpan, error) { return q.trace(s.traceID) },
			func(spans []jaegerSpan) bool { return len(spans) > 0 })
		if len(spans) != 1 {
			t.Errorf("trace %s has %d spans, want tokentap's only: %v", s.traceID, len(spans), spans)
			continue
		}
		sp := spans[0]
		if sp.Name != s.spanName || sp.Kind != otlpKindClient || sp.ParentSpanID != s.parentID {
			t.Errorf("span %s, want %q, CLIENT, parent %s", sp, s.spanName, s.parentID)
		}
		if sp.Resource["service.name"] != collectorTestService {
			t.Errorf("span %s: service.name %v, want %s", sp, sp.Resource["service.name"], collectorTestService)
		}
		instance, _ := sp.Resource["service.instance.id"].(string)
		if instance != "tokentap-a" && instance != "tokentap-b" {
			t.Errorf("span %s: service.instance.id %q, want tokentap-a or tokentap-b", sp, instance)
			continue
		}
		if perInstance[instance] == nil {
			perInstance[instance] = map[string]int{}
		}
		perInstance[instance][s.spanName]++
	}
	if len(perInstance) != 2 {
		t.Errorf("spans came from %d instances (%v), want both: the load balancer spreads requests", len(perInstance), perInstance)
	}
	// The search finds them all too, without their ids.
	found := pollJaeger(t, "the search for "+collectorTestService, func() ([]jaegerSpan, error) {
		return q.search(collectorTestService, "", start.Add(-time.Minute), time.Now().Add(time.Minute))
	}, func(spans []jaegerSpan) bool { return len(spans) >= len(all) })
	if len(found) != len(all) {
		t.Errorf("the search found %d spans, want %d (one per request)", len(found), len(all))
	}

	// Prometheus's branch: the spanmetrics counts per instance and span
	// name equal Jaeger's spans (polled: the connector flushes each
	// second, and the counts grow to their final value).
	var counts map[string]map[string]int
	deadline := time.Now().Add(jaegerTraceTimeout)
	for {
		var err error
		counts, err = collectorScrapeCalls(client, "http://"+collectorTestPrometheus+"/metrics", collectorTestService)
		if err == nil && collectorEqualCounts(counts, perInstance) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus counts %v (error %v), want Jaeger's spans per instance and operation %v", counts, err, perInstance)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("spans per instance and operation, in Jaeger and in Prometheus: %v", perInstance)
}

// collectorCallsLine is one sample of the spanmetrics call counter.
var collectorCallsLine = regexp.MustCompile(`^traces_span_metrics_calls_total\{(.*)\} (\S+)$`)

var collectorPromLabel = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// collectorScrapeCalls reads traces_span_metrics_calls_total for service from a
// Prometheus text endpoint: instance -> span name -> count, CLIENT spans
// only.
func collectorScrapeCalls(client *http.Client, url, service string) (map[string]map[string]int, error) {
	res, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", url, res.StatusCode)
	}
	out := map[string]map[string]int{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		m := collectorCallsLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for _, l := range collectorPromLabel.FindAllStringSubmatch(m[1], -1) {
			v, err := strconv.Unquote(`"` + l[2] + `"`)
			if err != nil {
				return nil, fmt.Errorf("label %s in %q: %v", l[1], sc.Text(), err)
			}
			labels[l[1]] = v
		}
		if labels["service_name"] != service || labels["span_kind"] != "SPAN_KIND_CLIENT" {
			continue
		}
		n, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, fmt.Errorf("value in %q: %v", sc.Text(), err)
		}
		if out[labels["instance"]] == nil {
			out[labels["instance"]] = map[string]int{}
		}
		out[labels["instance"]][labels["span_name"]] += int(n)
	}
	return out, sc.Err()
}

func collectorEqualCounts(a, b map[string]map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, am := range a {
		bm, ok := b[k]
		if !ok || len(am) != len(bm) {
			return false
		}
		for n, c := range am {
			if bm[n] != c {
				return false
			}
		}
	}
	return true
}
