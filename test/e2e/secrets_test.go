package e2e

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"

	"github.com/tokentap/tokentap/internal/simulator"
	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// TestSecretsNeverExported sends every kind of credential LLM APIs use
// (Authorization, Proxy-Authorization, x-api-key, api-key, x-goog-api-key,
// cookies, and key=, access_token= and sig= in the query string) through
// the built tokentap binary, with debug logging and an access log on, to
// routes with content capture off and on, in every API format the
// simulator speaks, streamed, whole, failing and with the upstream down.
// It collects everything the process exported or wrote: the spans and
// metric points as they went over OTLP (raw protobuf, so no attribute,
// event or resource is left out), the admin API's /tokentap/stats and
// /metrics, the log file at debug level, the access log, stdout and
// stderr; and asserts no credential appears in any of it.
//
// Caddy's own loggers write request headers and the URI into the access
// log and debug lines. They already hide Authorization,
// Proxy-Authorization and Cookie, but not the other key headers or the
// query string, which tokentap cannot change from inside a handler. So
// the test runs with plain JSON logs, where it checks everything tokentap
// itself wrote (its own log lines and the access log's tokentap object)
// and reports what Caddy's lines would have shown; and with the log filter
// docs/telemetry.md gives, read from the doc (docLogFilter), where every
// byte of every log must be clean.
//
// So that a clean result means something, it also checks that the
// collection is whole: a span per exchange, the request model (a random
// name) found in the exported bytes, debug and access log lines present,
// and, on the capturing route, content that is there and right: each span
// carries the simulator's exact answer as its output message and the
// instructions the API keeps apart. And a third run exports a credential
// on purpose, a label copying X-Api-Key, which the same search must report
// everywhere a label goes (spans, metric points, stats, /metrics), and no
// other credential.
func TestSecretsNeverExported(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the tokentap binary")
	}
	filter := docLogFilter(t)
	bin := testbin.Build(t)
	for _, tc := range []struct {
		name string
		// logFormat is the body of the test's log blocks: a plain JSON
		// format, or the documented filter.
		logFormat string
		filtered  bool
		// options go in every tokentap block.
		options string
		// leak names the credential the options export, which the search
		// must report in each of leakIn; "" for none.
		leak   string
		leakIn []string
	}{
		{name: "plain logs: what tokentap writes", logFormat: "format json"},
		{name: "documented log filter: every line", logFormat: filter, filtered: true},
		{
			name:      "a label copying X-Api-Key is reported",
			logFormat: "format json",
			options:   "label key {http.request.header.X-Api-Key}",
			leak:      "X-Api-Key",
			leakIn: []string{"spans (OTLP)", "metric points (OTLP)",
				"admin /tokentap/stats", "admin /tokentap/stats/sketches", "admin /metrics"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := runSecrets(t, bin, tc.logFormat, tc.options)
			run.checkWhole(t)
			leaks := run.leaks(t, tc.filtered)
			if tc.leak == "" {
				for _, l := range leaks {
					t.Errorf("the %s credential appears in %s: …%q…", l.what, l.where, l.excerpt)
				}
				return
			}
			// The configuration leaks on purpose: the search must say so,
			// where the label goes, and find no other credential.
			found := map[string]bool{}
			for _, l := range leaks {
				if l.what != tc.leak {
					t.Errorf("the %s credential appears in %s: …%q…", l.what, l.where, l.excerpt)
				}
				found[l.where] = true
			}
			for _, where := range tc.leakIn {
				if !found[where] {
					t.Errorf("the search did not report the %s credential in %s, where the label puts it", tc.leak, where)
				}
			}
			if len(found) > 0 {
				t.Logf("the search reported the %s credential in %s", tc.leak, strings.Join(slices.Sorted(maps.Keys(found)), ", "))
			}
		})
	}
}

// Ports of this test, on 127.0.0.1 only.
const (
	secretsProxyPort = 9450
	secretsSimPort   = 9451
	secretsOTLPPort  = 9452
	secretsDownPort  = 9453 // nothing listens there: an upstream that is down
	secretsAdminPort = 2410
)

// docLogFilterMarker is the line of docs/telemetry.md right before the log
// filter it recommends, a fenced `log { ... }` block.
const docLogFilterMarker = "<!-- TestSecretsNeverExported (test/e2e/secrets_test.go) uses the block below verbatim -->"

// docLogFilter returns the body of the log block docs/telemetry.md
// recommends to keep API keys and query credentials out of Caddy's logs,
// so that what the test checks is what the doc says.
func docLogFilter(t *testing.T) string {
	t.Helper()
	const doc = "docs/telemetry.md"
	b, err := os.ReadFile(filepath.Join(testbin.RepoRoot(t), doc))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	at := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == docLogFilterMarker {
			if at >= 0 {
				t.Fatalf("%s has the log filter's marker twice, lines %d and %d", doc, at+1, i+1)
			}
			at = i
		}
	}
	if at < 0 {
		t.Fatalf("%s has no line %q before the log filter", doc, docLogFilterMarker)
	}
	if at+1 >= len(lines) || !strings.HasPrefix(lines[at+1], "```") {
		t.Fatalf("%s line %d: the log filter's marker is not followed by a fenced block", doc, at+1)
	}
	var block []string
	closed := false
	for _, l := range lines[at+2:] {
		if strings.HasPrefix(l, "```") {
			closed = true
			break
		}
		block = append(block, l)
	}
	if !closed || len(block) < 3 || block[0] != "log {" || block[len(block)-1] != "}" {
		t.Fatalf("%s line %d: the block after the log filter's marker is not a whole `log { ... }` block:\n%s",
			doc, at+1, strings.Join(block, "\n"))
	}
	return strings.Join(block[1:len(block)-1], "\n")
}

// secretsConfig is the Caddyfile of a run; LOGFORMAT is the body of the log
// blocks, DIR the directory of the log files, OPTIONS tokentap's options.
const secretsConfig = `{
	admin 127.0.0.1:2410
	skip_install_trust
	auto_https off
	http_port 9450
	grace_period 1s
	log default {
		output file DIR/caddy.log
LOGFORMAT
		level DEBUG
	}
}

http://127.0.0.1:9450 {
	bind 127.0.0.1
	log {
		output file DIR/access.log
LOGFORMAT
	}
	handle_path /plain/* {
		tokentap {
			OPTIONS
		}
		reverse_proxy 127.0.0.1:9451
	}
	handle_path /capture/* {
		tokentap {
			capture_content
			OPTIONS
		}
		reverse_proxy 127.0.0.1:9451
	}
	handle_path /down/* {
		tokentap {
			OPTIONS
		}
		reverse_proxy 127.0.0.1:9453
	}
}

http://127.0.0.1:9451 {
	bind 127.0.0.1
	tokentap_simulator {
		time_to_first_token 5ms
		tokens_per_second 500
		output_tokens 8
	}
}
`

// secretsRun is what one run of the binary exported and wrote.
type secretsRun struct {
	secrets map[string]string // what -> value
	canary  string            // the request model: it must appear, to show the search finds what is there
	// requests is the number of measured exchanges sent; captured, how
	// many of them went through the capturing route.
	requests, captured int
	// want is what the capturing route's spans must carry, by trace id:
	// the simulator's own answer as the output, and the instructions
	// where the API keeps them apart.
	want        map[string]capturedContent
	artifacts   []artifact
	spans       []byte   // the raw OTLP trace requests, concatenated
	rawTraces   [][]byte // and one by one
	traces      []*collectortrace.ExportTraceServiceRequest
	logLines    []map[string]any // the debug log, decoded
	accessLines []map[string]any // the access log, decoded
	rawLogs     []artifact       // the log files, stdout and stderr, whole
}

// capturedContent is what a captured span must say.
type capturedContent struct {
	output, system string
}

// artifact is one thing the process exported or wrote.
type artifact struct {
	name string
	data []byte
}

func randomSecret(t *testing.T, prefix string) string {
	t.Helper()
	return prefix + randomHex(t, 12)
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// otlpReceiver keeps the raw bodies of OTLP/HTTP requests by path.
type otlpReceiver struct {
	mu     sync.Mutex
	bodies map[string][][]byte
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	o.bodies[r.URL.Path] = append(o.bodies[r.URL.Path], b)
	o.mu.Unlock()
	// An empty Export*ServiceResponse is a success in protobuf.
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

func (o *otlpReceiver) get(path string) [][]byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([][]byte(nil), o.bodies[path]...)
}

// runSecrets starts the binary, sends the requests, stops it and collects
// what it exported and wrote.
func runSecrets(t *testing.T, bin, logFormat, options string) *secretsRun {
	t.Helper()
	dir := t.TempDir()
	config := strings.NewReplacer("DIR", dir, "LOGFORMAT", logFormat, "OPTIONS", options).Replace(secretsConfig)

	recv := &otlpReceiver{bodies: map[string][][]byte{}}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", secretsOTLPPort))
	if err != nil {
		t.Fatalf("the OTLP receiver's port is taken: %v", err)
	}
	srv := &http.Server{Handler: recv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	var stdout, stderr testbin.Buffer
	proc := testbin.Start(t, testbin.Config{
		Bin:       bin,
		Caddyfile: config,
		Env: append(os.Environ(),
			"HOME="+dir,
			"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
			fmt.Sprintf("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%d", secretsOTLPPort),
			"OTEL_EXPORTER_OTLP_HEADERS=",
			"OTEL_SERVICE_NAME=tokentap-secrets",
			"OTEL_TRACES_SAMPLER=always_on",
			"OTEL_BSP_SCHEDULE_DELAY=100",
			"OTEL_METRIC_EXPORT_INTERVAL=200",
			// capture_content's switch from the environment
			// (caddymodule's captureEnv): off, so that only the
			// capturing route captures.
			"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=",
		),
		Stdout: &stdout,
		Stderr: &stderr,
	})
	proxy := fmt.Sprintf("http://127.0.0.1:%d", secretsProxyPort)
	admin := fmt.Sprintf("http://127.0.0.1:%d", secretsAdminPort)
	// A TCP connection, not a request: a request would add a line to the
	// logs the test searches. Both servers: Caddy starts them one after
	// the other, so the proxy can listen before its upstream does, and the
	// first request would get a 502 (a CI run of 67c0787 did).
	proc.WaitListening(t, 30*time.Second, fmt.Sprintf("127.0.0.1:%d", secretsProxyPort), fmt.Sprintf("127.0.0.1:%d", secretsSimPort))

	run := &secretsRun{
		secrets: map[string]string{
			"Authorization":       randomSecret(t, "sk-authz-"),
			"Proxy-Authorization": randomSecret(t, "proxyauthz"),
			"X-Api-Key":           randomSecret(t, "xapikey"),
			"Api-Key":             randomSecret(t, "apikey"),
			"X-Goog-Api-Key":      randomSecret(t, "googapikey"),
			"Cookie session":      randomSecret(t, "cookiesession"),
			"Cookie other":        randomSecret(t, "cookieother"),
			"?key=":               randomSecret(t, "querykey"),
			"?access_token=":      randomSecret(t, "accesstoken"),
			"&sig=":               randomSecret(t, "querysig"),
		},
		canary: randomSecret(t, "secrets-probe-model-"),
	}
	run.send(t, proxy)
	// The spans go out in batches: the stats and metrics read below must
	// count every exchange, so wait for the last batch first.
	for deadline := time.Now().Add(15 * time.Second); spanCount(t, recv.get("/v1/traces")) < run.requests; {
		if time.Now().After(deadline) {
			t.Fatalf("%d spans exported for %d exchanges", spanCount(t, recv.get("/v1/traces")), run.requests)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Everything the admin API serves about the traffic.
	for _, path := range []string{"/tokentap/stats", "/tokentap/stats/sketches", "/metrics"} {
		resp, err := http.Get(admin + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			run.artifacts = append(run.artifacts, artifact{"admin " + path, b})
		} else {
			t.Logf("admin %s: %d, not collected", path, resp.StatusCode)
		}
	}

	// Stop the process the way an operator does: it flushes its spans and
	// metrics on the way out.
	resp, err := http.Post(admin+"/stop", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	_ = proc.WaitExit(t, 20*time.Second)

	run.rawTraces = recv.get("/v1/traces")
	for _, b := range run.rawTraces {
		run.spans = append(run.spans, b...)
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatalf("an OTLP trace request that is not one: %v", err)
		}
		run.traces = append(run.traces, &req)
	}
	run.artifacts = append(run.artifacts, artifact{"spans (OTLP)", run.spans})
	var metrics []byte
	for _, b := range recv.get("/v1/metrics") {
		metrics = append(metrics, b...)
	}
	run.artifacts = append(run.artifacts, artifact{"metric points (OTLP)", metrics})
	if len(metrics) == 0 {
		t.Log("no metric points were exported")
	}
	// tokentap exports no logs over OTLP; if it ever does, they are
	// searched too.
	for _, b := range recv.get("/v1/logs") {
		run.artifacts = append(run.artifacts, artifact{"OTLP logs", b})
	}

	caddyLog := readFile(t, filepath.Join(dir, "caddy.log"))
	accessLog := readFile(t, filepath.Join(dir, "access.log"))
	run.logLines = jsonLines(t, caddyLog)
	run.accessLines = jsonLines(t, accessLog)
	run.rawLogs = []artifact{
		{"the debug log", caddyLog},
		{"the access log", accessLog},
		{"stdout", stdout.Bytes()},
		{"stderr", stderr.Bytes()},
	}
	return run
}

// send sends every request with every credential.
func (run *secretsRun) send(t *testing.T, proxy string) {
	t.Helper()
	query := "key=" + run.secrets["?key="] + "&access_token=" + run.secrets["?access_token="] + "&sig=" + run.secrets["&sig="]
	model := run.canary
	chat := `{"model":"` + model + `","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hello"}]}`
	type request struct {
		path, body string
		header     map[string]string
		status     int
	}
	requests := []request{
		{path: "/v1/chat/completions", body: chat, status: 200},
		{path: "/v1/chat/completions", body: strings.Replace(chat, `"stream":true`, `"stream":false`, 1), status: 200},
		{path: "/v1/chat/completions", body: chat, header: map[string]string{"Tokentap-Sim-Status": "429"}, status: 429},
		{path: "/v1/responses", body: `{"model":"` + model + `","stream":true,"instructions":"Be brief.","input":"hello"}`, status: 200},
		{path: "/v1/messages", body: `{"model":"` + model + `","stream":true,"max_tokens":64,"system":"Be brief.","messages":[{"role":"user","content":"hello"}]}`, status: 200},
		{path: "/v1beta/models/" + model + ":streamGenerateContent", body: `{"systemInstruction":{"parts":[{"text":"Be brief."}]},"contents":[{"role":"user","parts":[{"text":"hello"}]}]}`, status: 200},
		{path: "/api/chat", body: `{"model":"` + model + `","messages":[{"role":"user","content":"hello"}]}`, status: 200},
	}
	// The simulator as configured, to know what it answers.
	sim := &simulator.Handler{Profile: simulator.Profile{
		TimeToFirstToken: caddy.Duration(5 * time.Millisecond), TokensPerSecond: 500, OutputTokens: 8,
	}}
	if err := sim.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	run.want = map[string]capturedContent{}
	client := &http.Client{Timeout: 30 * time.Second}
	do := func(route string, rq request, wantStatus int) {
		target := rq.path + "?" + query
		if strings.Contains(rq.path, ":streamGenerateContent") {
			target += "&alt=sse"
		}
		req, err := http.NewRequest("POST", proxy+route+target, strings.NewReader(rq.body))
		if err != nil {
			t.Fatal(err)
		}
		// A trace id of the test's, which tokentap's span continues, ties
		// each span to its request.
		tr := testbin.NewTrace()
		traceID := tr.ID
		req.Header.Set("traceparent", tr.Traceparent())
		if route == "/capture" && wantStatus == http.StatusOK {
			plan, err := sim.PlanTarget(target, []byte(rq.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			var system string
			if strings.Contains(rq.body, "Be brief.") && !strings.Contains(rq.path, "/chat/completions") {
				system = `[{"type":"text","content":"Be brief."}]`
			}
			run.want[traceID] = capturedContent{output: plan.Text(), system: system}
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+run.secrets["Authorization"])
		req.Header.Set("Proxy-Authorization", "Basic "+run.secrets["Proxy-Authorization"])
		req.Header.Set("X-Api-Key", run.secrets["X-Api-Key"])
		req.Header.Set("Api-Key", run.secrets["Api-Key"])
		req.Header.Set("X-Goog-Api-Key", run.secrets["X-Goog-Api-Key"])
		req.Header.Set("Cookie", "session="+run.secrets["Cookie session"]+"; other="+run.secrets["Cookie other"])
		for k, v := range rq.header {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s%s: %v", route, rq.path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != wantStatus {
			t.Fatalf("%s%s: status %d, want %d", route, rq.path, resp.StatusCode, wantStatus)
		}
		run.requests++
		if route == "/capture" {
			run.captured++
		}
	}
	for _, route := range []string{"/plain", "/capture"} {
		for _, rq := range requests {
			do(route, rq, rq.status)
		}
	}
	do("/down", requests[0], http.StatusBadGateway)
}

// spanCount counts the spans in OTLP trace requests.
func spanCount(t *testing.T, bodies [][]byte) int {
	t.Helper()
	n := 0
	for _, b := range bodies {
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatalf("an OTLP trace request that is not one: %v", err)
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				n += len(ss.Spans)
			}
		}
	}
	return n
}

// checkCaptured compares a captured span's content with the simulator's
// answer: one assistant message holding its text, with the span's finish
// reason; and the system instructions where the API has them apart.
func checkCaptured(t *testing.T, a map[string]*commonpb.AnyValue, want capturedContent) {
	t.Helper()
	var out []struct {
		Role  string
		Parts []struct {
			Type, Content string
		}
		FinishReason string `json:"finish_reason"`
	}
	js := a["gen_ai.output.messages"].GetStringValue()
	if err := json.Unmarshal([]byte(js), &out); err != nil {
		t.Errorf("output messages %q: %v", js, err)
		return
	}
	finish := ""
	if vs := a["gen_ai.response.finish_reasons"].GetArrayValue().GetValues(); len(vs) > 0 {
		finish = vs[0].GetStringValue()
	}
	if len(out) != 1 || out[0].Role != "assistant" || len(out[0].Parts) != 1 || out[0].Parts[0].Type != "text" ||
		out[0].Parts[0].Content != want.output || out[0].FinishReason != finish || finish == "" {
		t.Errorf("output messages %s, want the simulator's %q finished by %q", js, want.output, finish)
	}
	if got := a["gen_ai.system_instructions"].GetStringValue(); got != want.system {
		t.Errorf("system instructions %q, want %q", got, want.system)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jsonLines decodes a JSON-lines log; every line must be JSON.
func jsonLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range bytes.Lines(b) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("a log line that is not JSON: %v: %s", err, line)
		}
		out = append(out, m)
	}
	return out
}

// checkWhole asserts the run exported and wrote what it should, so that
// a search of it that finds nothing means something.
func (run *secretsRun) checkWhole(t *testing.T) {
	t.Helper()
	// The collection is not empty: every exchange has its span, the
	// capturing route's spans carry content, the logs have their lines.
	spans, withContent := 0, 0
	checked := map[string]bool{}
	for _, req := range run.traces {
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans++
					a := map[string]*commonpb.AnyValue{}
					for _, kv := range s.Attributes {
						a[kv.Key] = kv.Value
					}
					if strings.Contains(a["gen_ai.input.messages"].GetStringValue(), "hello") {
						withContent++
					}
					traceID := hex.EncodeToString(s.TraceId)
					if want, ok := run.want[traceID]; ok {
						checked[traceID] = true
						checkCaptured(t, a, want)
					}
				}
			}
		}
	}
	if len(checked) != len(run.want) {
		t.Errorf("%d of the %d captured exchanges' spans were found", len(checked), len(run.want))
	}
	if spans < run.requests {
		t.Errorf("%d spans exported for %d exchanges", spans, run.requests)
	}
	if withContent != run.captured {
		t.Errorf("%d spans carry the captured input, want %d", withContent, run.captured)
	}
	if len(run.accessLines) < run.requests {
		t.Errorf("%d access log lines for %d requests", len(run.accessLines), run.requests)
	}
	debug := 0
	for _, l := range run.logLines {
		if l["level"] == "debug" {
			debug++
		}
	}
	if debug == 0 {
		t.Error("no debug lines were logged")
	}
	// The search finds what is there: the request model is in the spans
	// (and, with its field, in the access log).
	if !bytes.Contains(run.spans, []byte(run.canary)) {
		t.Error("the request model is not in the exported spans: the search would find nothing")
	}
}

// leak is one credential found where it must not be.
type leak struct {
	what, where string
	excerpt     []byte
}

// leaks searches what tokentap exported and wrote for the credentials:
// every export, tokentap's own log lines and the access log's tokentap
// object; and, when Caddy's logs went through the filter, every byte of
// every log.
func (run *secretsRun) leaks(t *testing.T, filtered bool) []leak {
	t.Helper()
	// What tokentap itself writes, in either run: its own log lines and
	// the access log's tokentap object.
	var own []artifact
	for i, l := range run.logLines {
		if name, _ := l["logger"].(string); strings.Contains(name, "tokentap") {
			b, _ := json.Marshal(l)
			own = append(own, artifact{fmt.Sprintf("tokentap's log line %d (%s)", i, name), b})
		}
	}
	for i, l := range run.accessLines {
		for k, v := range l {
			if strings.HasPrefix(k, "tokentap") {
				b, _ := json.Marshal(v)
				own = append(own, artifact{fmt.Sprintf("access log line %d, field %s", i, k), b})
			}
		}
	}
	search := append(append([]artifact(nil), run.artifacts...), own...)
	summary := []string{fmt.Sprintf("%d spans", spanCount(t, run.rawTraces)), fmt.Sprintf("%d of tokentap's own log lines and access log objects", len(own))}
	for _, a := range append(append([]artifact(nil), run.artifacts...), run.rawLogs...) {
		summary = append(summary, fmt.Sprintf("%s: %d bytes", a.name, len(a.data)))
	}
	t.Logf("searched %s", strings.Join(summary, "; "))
	if filtered {
		search = append(search, run.rawLogs...)
	} else {
		// Caddy's own lines, for the record: why the filter is needed.
		for _, a := range run.rawLogs {
			for what, secret := range run.secrets {
				if n := bytes.Count(a.data, []byte(secret)); n > 0 {
					t.Logf("without a log filter, Caddy's lines in %s show %s %d times", a.name, what, n)
				}
			}
		}
	}
	var found []leak
	for _, a := range search {
		for what, secret := range run.secrets {
			if i := bytes.Index(a.data, []byte(secret)); i >= 0 {
				from, to := max(0, i-200), min(len(a.data), i+len(secret)+100)
				found = append(found, leak{what, a.name, a.data[from:to]})
			}
		}
	}
	return found
}
