package e2e

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// The addresses of TestJaeger, in the ranges this test owns (HTTP 9340-9344,
// admin 2340-2344, Jaeger 14300-14399), on loopback only.
const (
	jaegerTestTokentapPort  = "9340"
	jaegerTestSimulatorPort = "9341"
	jaegerTestAdmin         = "127.0.0.1:2340"
	jaegerTestOTLPGRPC      = "127.0.0.1:14317"
	jaegerTestOTLPHTTP      = "127.0.0.1:14318"
	jaegerTestQueryHTTP     = "127.0.0.1:14386"
	jaegerTestQueryGRPC     = "127.0.0.1:14385"
	jaegerTestHealth        = "127.0.0.1:14333"

	// jaegerTestService is the service.name the spans are filed under;
	// Jaeger's search needs it.
	jaegerTestService = "tokentap-e2e"
)

// jaegerExchange is one request sent through tokentap and what its span in
// Jaeger must say.
type jaegerExchange struct {
	name string
	// route is /sim (tokentap, then the simulator) or /traced (Caddy's
	// tracing handler first): examples/jaeger/Caddyfile.
	route, path, body string
	header            map[string]string
	// traceparent: the request carries a W3C traceparent, so the span must
	// be in that trace, under that span (or under Caddy's, on /traced).
	traceparent bool

	operation, provider, dialect, model string
	stream                              bool
	// inField, outField name the usage counts in the body the client got,
	// the ground truth for the span's gen_ai.usage.* attributes.
	inField, outField string
	// finish is the exact gen_ai.response.finish_reasons where the format
	// has no finish reason of its own to copy (Responses' status
	// "completed" is "stop"); nil means each reason must be a string of the
	// response body.
	finish []any
	// noID: the format has no response id (Ollama).
	noID bool
	// extra are the format's own attributes.
	extra []jaegerAttr
	// status is the upstream's status; an error status must give an error
	// span without usage.
	status int
}

// ollamaServerTimings: Ollama reports its own durations in its last
// message; tokentap passes them on (docs/telemetry.md, server timings).
var ollamaServerTimings = []jaegerAttr{
	{"tokentap.server_timing.total", jaegerFloatIn(math.SmallestNonzeroFloat64, 60)},
	{"tokentap.server_timing.eval", jaegerFloatIn(math.SmallestNonzeroFloat64, 60)},
	{"tokentap.server_timing.prompt_eval", jaegerPresent{}},
	{"tokentap.server_timing.load", jaegerPresent{}},
}

func (x jaegerExchange) spanName() string { return x.operation + " " + x.model }

// TestJaeger runs examples/jaeger/run.sh (Jaeger v2 from test/tools/jaeger and the
// built tokentap with examples/jaeger/Caddyfile, exporting over OTLP gRPC),
// sends one request in each format the simulator speaks, then reads every
// span back from Jaeger's query API, by search and by trace id, and checks
// its name, kind, parent and attributes against docs/telemetry.md and
// against what the client received.
func TestJaeger(t *testing.T) {
	jaeger, tokentap := jaegerBinary(t), testbin.Binary(t)
	root := testbin.RepoRoot(t)
	addrs := []string{"127.0.0.1:" + jaegerTestTokentapPort, "127.0.0.1:" + jaegerTestSimulatorPort, jaegerTestAdmin,
		jaegerTestOTLPGRPC, jaegerTestOTLPHTTP, jaegerTestQueryHTTP, jaegerTestQueryGRPC, jaegerTestHealth}
	testbin.RequireFree(t, addrs...)
	// Registered first, so it runs last: after the script's own cleanup.
	t.Cleanup(func() { testbin.WaitFree(t, jaegerPortFreeTimeout, addrs...) })

	start := time.Now()
	run := startJaegerScript(t, root, filepath.Join(root, "examples", "jaeger", "run.sh"),
		"JAEGER_BINARY="+jaeger,
		"TOKENTAP_BINARY="+tokentap,
		"TOKENTAP_PORT="+jaegerTestTokentapPort,
		"SIMULATOR_PORT="+jaegerTestSimulatorPort,
		"TOKENTAP_ADMIN="+jaegerTestAdmin,
		"JAEGER_OTLP_GRPC="+jaegerTestOTLPGRPC,
		"JAEGER_OTLP_HTTP="+jaegerTestOTLPHTTP,
		"JAEGER_QUERY_HTTP="+jaegerTestQueryHTTP,
		"JAEGER_QUERY_GRPC="+jaegerTestQueryGRPC,
		"JAEGER_HEALTH="+jaegerTestHealth,
		"OTEL_SERVICE_NAME="+jaegerTestService,
		"OTEL_BSP_SCHEDULE_DELAY=200",
	)
	run.waitOutput(t, "run.sh: ready")

	msgs := `"messages":[{"role":"user","content":"how fast is it"}]`
	gemini := `{"contents":[{"role":"user","parts":[{"text":"how fast is it"}]}]}`
	exchanges := []jaegerExchange{
		{name: "openai chat, streamed, with traceparent", route: "/sim", path: "/v1/chat/completions",
			body:        `{"model":"e2e-chat-stream","stream":true,"stream_options":{"include_usage":true},"max_tokens":64,` + msgs + `}`,
			traceparent: true, operation: "chat", provider: "openai", dialect: "openai_chat", model: "e2e-chat-stream", stream: true,
			inField: "prompt_tokens", outField: "completion_tokens"},
		{name: "openai chat, one body", route: "/sim", path: "/v1/chat/completions",
			body:      `{"model":"e2e-chat-body",` + msgs + `}`,
			operation: "chat", provider: "openai", dialect: "openai_chat", model: "e2e-chat-body",
			inField: "prompt_tokens", outField: "completion_tokens"},
		{name: "openai responses, streamed", route: "/sim", path: "/v1/responses",
			body:      `{"model":"e2e-responses","stream":true,"input":"how fast is it"}`,
			operation: "chat", provider: "openai", dialect: "openai_responses", model: "e2e-responses", stream: true,
			inField: "input_tokens", outField: "output_tokens", finish: []any{"stop"}},
		{name: "anthropic messages, streamed, with traceparent", route: "/sim", path: "/v1/messages",
			body:        `{"model":"e2e-messages-stream","stream":true,"max_tokens":500,` + msgs + `}`,
			traceparent: true, operation: "chat", provider: "anthropic", dialect: "anthropic_messages", model: "e2e-messages-stream", stream: true,
			inField: "input_tokens", outField: "output_tokens"},
		{name: "anthropic messages, one body", route: "/sim", path: "/v1/messages",
			body:      `{"model":"e2e-messages-body","max_tokens":500,` + msgs + `}`,
			operation: "chat", provider: "anthropic", dialect: "anthropic_messages", model: "e2e-messages-body",
			inField: "input_tokens", outField: "output_tokens"},
		{name: "gemini, SSE", route: "/sim", path: "/v1beta/models/e2e-gemini-sse:streamGenerateContent?alt=sse", body: gemini,
			traceparent: true, operation: "generate_content", provider: "gcp.gemini", dialect: "gemini", model: "e2e-gemini-sse", stream: true,
			inField: "promptTokenCount", outField: "candidatesTokenCount"},
		{name: "gemini, streamed array", route: "/sim", path: "/v1beta/models/e2e-gemini-array:streamGenerateContent", body: gemini,
			operation: "generate_content", provider: "gcp.gemini", dialect: "gemini", model: "e2e-gemini-array", stream: true,
			inField: "promptTokenCount", outField: "candidatesTokenCount"},
		{name: "gemini, one body", route: "/sim", path: "/v1beta/models/e2e-gemini-body:generateContent", body: gemini,
			operation: "generate_content", provider: "gcp.gemini", dialect: "gemini", model: "e2e-gemini-body",
			inField: "promptTokenCount", outField: "candidatesTokenCount"},
		{name: "ollama chat, streamed", route: "/sim", path: "/api/chat", body: `{"model":"e2e-ollama-chat",` + msgs + `}`,
			traceparent: true, operation: "chat", provider: "ollama", dialect: "ollama", model: "e2e-ollama-chat", stream: true,
			inField: "prompt_eval_count", outField: "eval_count", noID: true, extra: ollamaServerTimings},
		{name: "ollama generate, streamed", route: "/sim", path: "/api/generate", body: `{"model":"e2e-ollama-generate","prompt":"how fast is it"}`,
			operation: "text_completion", provider: "ollama", dialect: "ollama", model: "e2e-ollama-generate", stream: true,
			inField: "prompt_eval_count", outField: "eval_count", noID: true, extra: ollamaServerTimings},
		{name: "openai chat behind Caddy's tracing handler", route: "/traced", path: "/v1/chat/completions",
			body:        `{"model":"e2e-traced","stream":true,"stream_options":{"include_usage":true},` + msgs + `}`,
			traceparent: true, operation: "chat", provider: "openai", dialect: "openai_chat", model: "e2e-traced", stream: true,
			inField: "prompt_tokens", outField: "completion_tokens"},
		{name: "upstream 429", route: "/sim", path: "/v1/chat/completions",
			body:   `{"model":"e2e-429","stream":true,` + msgs + `}`,
			header: map[string]string{"Tokentap-Sim-Status": "429"}, traceparent: true,
			operation: "chat", provider: "openai", dialect: "openai_chat", model: "e2e-429", stream: true, status: 429},
	}

	// All requests first, then all lookups: the spans travel while the
	// next requests run.
	sent := make([]jaegerSent, len(exchanges))
	client := &http.Client{Timeout: 30 * time.Second}
	for i, x := range exchanges {
		sent[i] = sendJaegerExchange(t, client, x)
	}

	q := newJaegerQuery(jaegerTestQueryHTTP)
	for i, x := range exchanges {
		t.Run(x.name, func(t *testing.T) {
			checkJaegerExchange(t, q, start, x, sent[i])
		})
	}
}

// jaegerSent is what the client saw of one exchange.
type jaegerSent struct {
	traceID, parentID string // the traceparent sent, if any
	status            int
	body              string
	// trailer is the simulator's report of its schedule: the planned time
	// to first token and the tokens it sent.
	trailer http.Header
	err     error
}

func sendJaegerExchange(t *testing.T, client *http.Client, x jaegerExchange) jaegerSent {
	t.Helper()
	url := "http://127.0.0.1:" + jaegerTestTokentapPort + x.route + x.path
	req, err := http.NewRequest("POST", url, strings.NewReader(x.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range x.header {
		req.Header.Set(k, v)
	}
	var s jaegerSent
	if x.traceparent {
		tr := testbin.NewTrace()
		s.traceID, s.parentID = tr.ID, tr.Parent
		req.Header.Set("traceparent", tr.Traceparent())
	}
	res, err := client.Do(req)
	if err != nil {
		s.err = err
		return s
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	s.status, s.body, s.trailer, s.err = res.StatusCode, string(body), res.Trailer, err
	return s
}

func checkJaegerExchange(t *testing.T, q *jaegerQuery, start time.Time, x jaegerExchange, s jaegerSent) {
	wantStatus := x.status
	if wantStatus == 0 {
		wantStatus = http.StatusOK
	}
	if s.err != nil || s.status != wantStatus {
		t.Fatalf("POST %s%s: status %d, %v, want %d; body:\n%s", x.route, x.path, s.status, s.err, wantStatus, s.body)
	}

	// The search API: by service and operation (the span name), as a user
	// finds a request whose trace id they do not know.
	found := pollJaeger(t, "a trace of "+jaegerTestService+" with operation "+x.spanName(), func() ([]jaegerSpan, error) {
		return q.search(jaegerTestService, x.spanName(), start.Add(-time.Minute), time.Now().Add(time.Minute))
	}, func(spans []jaegerSpan) bool { return len(spans) > 0 })
	var ours []jaegerSpan
	for _, sp := range found {
		if sp.Name == x.spanName() {
			ours = append(ours, sp)
		}
	}
	if len(ours) != 1 {
		t.Fatalf("the search found %d spans named %q, want 1 (one request was sent): %v", len(ours), x.spanName(), found)
	}
	if s.traceID != "" && ours[0].TraceID != s.traceID {
		t.Errorf("the span is in trace %s, want the traceparent's %s", ours[0].TraceID, s.traceID)
	}

	// The trace API: the whole trace by id.
	trace := pollJaeger(t, "trace "+ours[0].TraceID, func() ([]jaegerSpan, error) { return q.trace(ours[0].TraceID) },
		func(spans []jaegerSpan) bool { return len(spans) >= jaegerExpectedSpans(x) })
	if len(trace) != jaegerExpectedSpans(x) {
		t.Fatalf("trace %s has %d spans, want %d: %v", ours[0].TraceID, len(trace), jaegerExpectedSpans(x), trace)
	}
	var sp, server *jaegerSpan
	for i := range trace {
		switch trace[i].Scope {
		case "github.com/tokentap/tokentap":
			sp = &trace[i]
		default:
			server = &trace[i]
		}
	}
	if sp == nil {
		t.Fatalf("trace %s has no span of scope github.com/tokentap/tokentap: %v", ours[0].TraceID, trace)
	}
	if sp.SpanID != ours[0].SpanID {
		t.Errorf("the trace's tokentap span is %s, the search's %s", sp.SpanID, ours[0].SpanID)
	}
	if sp.Name != x.spanName() || sp.Kind != otlpKindClient {
		t.Errorf("span %s, want name %q kind CLIENT (%d)", sp, x.spanName(), otlpKindClient)
	}
	if got := sp.Resource["service.name"]; got != jaegerTestService {
		t.Errorf("resource service.name %v, want %s", got, jaegerTestService)
	}

	// The parent: the traceparent's span, Caddy's SERVER span (itself the
	// traceparent's child) behind the tracing handler, or none.
	switch {
	case x.route == "/traced":
		if server == nil || server.Kind != otlpKindServer {
			t.Fatalf("behind Caddy's tracing handler the trace must hold Caddy's SERVER span; it has %v", trace)
		}
		if sp.ParentSpanID != server.SpanID {
			t.Errorf("tokentap's span has parent %q, want Caddy's span %s", sp.ParentSpanID, server.SpanID)
		}
		if server.ParentSpanID != s.parentID {
			t.Errorf("Caddy's span has parent %q, want the traceparent's span %s", server.ParentSpanID, s.parentID)
		}
	case x.traceparent:
		if sp.ParentSpanID != s.parentID {
			t.Errorf("the span has parent %q, want the traceparent's span %s", sp.ParentSpanID, s.parentID)
		}
	default:
		if sp.ParentSpanID != "" {
			t.Errorf("a request without traceparent must start a trace; the span has parent %q", sp.ParentSpanID)
		}
	}

	checkJaegerAttributes(t, *sp, x, s)
}

// jaegerExpectedSpans is how many spans the exchange's trace holds: tokentap's,
// and Caddy's behind the tracing handler.
func jaegerExpectedSpans(x jaegerExchange) int {
	if x.route == "/traced" {
		return 2
	}
	return 1
}

// jaegerAttr is one expected attribute: want is the exact value (string,
// int64, float64, bool, []any), jaegerAbsent{}, jaegerPresent{}, or a check function
// returning what is wrong.
type jaegerAttr struct {
	key  string
	want any
}

type (
	jaegerAbsent  struct{}
	jaegerPresent struct{}
)

func jaegerFloatIn(lo, hi float64) func(any) string {
	return func(v any) string {
		f, ok := v.(float64)
		if !ok {
			return fmt.Sprintf("want a float in [%g, %g]", lo, hi)
		}
		if f < lo || f > hi || math.IsNaN(f) {
			return fmt.Sprintf("want it in [%g, %g]", lo, hi)
		}
		return ""
	}
}

func jaegerIntAtLeast(lo int64) func(any) string {
	return func(v any) string {
		n, ok := v.(int64)
		if !ok || n < lo {
			return fmt.Sprintf("want an integer ≥ %d", lo)
		}
		return ""
	}
}

// jaegerInBody checks that a string attribute's value, or each element of an
// array, appears in the response body as a JSON string: the span reports
// what the provider said, not something made up.
func jaegerInBody(body string) func(any) string {
	return func(v any) string {
		var values []any
		switch v := v.(type) {
		case string:
			values = []any{v}
		case []any:
			if len(v) == 0 {
				return "want at least one value"
			}
			values = v
		default:
			return "want a string or an array of strings"
		}
		for _, e := range values {
			s, ok := e.(string)
			if !ok || s == "" || !strings.Contains(body, strconv.Quote(s)) {
				return fmt.Sprintf("%#v is not a string of the response body", e)
			}
		}
		return ""
	}
}

// jaegerLastCount is the last value of a JSON integer member named field in body:
// in a stream, the final count.
func jaegerLastCount(t *testing.T, body, field string) int64 {
	t.Helper()
	ms := regexp.MustCompile(`"`+regexp.QuoteMeta(field)+`"\s*:\s*(\d+)`).FindAllStringSubmatch(body, -1)
	if len(ms) == 0 {
		t.Fatalf("the response body has no %q count:\n%s", field, body)
	}
	n, _ := strconv.ParseInt(ms[len(ms)-1][1], 10, 64)
	return n
}

func jaegerTrailerSeconds(t *testing.T, h http.Header, name string) float64 {
	t.Helper()
	// The simulator writes seconds, as the spans do.
	s, err := strconv.ParseFloat(h.Get(name), 64)
	if err != nil {
		t.Fatalf("the simulator's trailer %s = %q: %v", name, h.Get(name), err)
	}
	return s
}

func checkJaegerAttributes(t *testing.T, sp jaegerSpan, x jaegerExchange, s jaegerSent) {
	t.Helper()
	simPort, _ := strconv.ParseInt(jaegerTestSimulatorPort, 10, 64)
	checks := []jaegerAttr{
		{"gen_ai.operation.name", x.operation},
		{"gen_ai.provider.name", x.provider},
		{"gen_ai.request.model", x.model},
		{"tokentap.dialect", x.dialect},
		{"server.address", "127.0.0.1"},
		{"server.port", simPort},
		{"http.response.status_code", int64(s.status)},
		{"tokentap.overhead", jaegerFloatIn(0, 1)},
	}
	if x.stream {
		checks = append(checks, jaegerAttr{"gen_ai.request.stream", true})
	} else {
		// semconv: set if and only if the request streams.
		checks = append(checks, jaegerAttr{"gen_ai.request.stream", jaegerAbsent{}})
	}

	if x.status != 0 {
		if sp.StatusCode != otlpStatusError {
			t.Errorf("span status %d (%q), want error (%d)", sp.StatusCode, sp.StatusMessage, otlpStatusError)
		}
		checks = append(checks,
			jaegerAttr{"error.type", strconv.Itoa(x.status)},
			jaegerAttr{"tokentap.outcome", outcomeOfStatus(x.status)},
			// An error status never carries token counts.
			jaegerAttr{"gen_ai.usage.input_tokens", jaegerAbsent{}},
			jaegerAttr{"gen_ai.usage.output_tokens", jaegerAbsent{}},
		)
		checkJaegerSpanAttributes(t, sp, checks)
		return
	}

	if sp.StatusCode != otlpStatusUnset {
		t.Errorf("span status %d (%q), want unset", sp.StatusCode, sp.StatusMessage)
	}
	sent, err := strconv.ParseInt(s.trailer.Get("Tokentap-Sim-Output-Tokens"), 10, 64)
	if err != nil || sent <= 0 {
		t.Fatalf("the simulator's trailer Tokentap-Sim-Output-Tokens = %q", s.trailer.Get("Tokentap-Sim-Output-Tokens"))
	}
	if got := jaegerLastCount(t, s.body, x.outField); got != sent {
		t.Errorf("the body reports %s=%d, the simulator's trailer %d tokens", x.outField, got, sent)
	}
	checks = append(checks,
		jaegerAttr{"error.type", jaegerAbsent{}},
		jaegerAttr{"tokentap.outcome", "completed"},
		jaegerAttr{"tokentap.usage.source", "reported"},
		jaegerAttr{"gen_ai.usage.input_tokens", jaegerLastCount(t, s.body, x.inField)},
		jaegerAttr{"gen_ai.usage.output_tokens", sent},
		jaegerAttr{"gen_ai.response.model", jaegerInBody(s.body)},
		jaegerAttr{"tokentap.time_to_first_byte", jaegerFloatIn(0, 30)},
	)
	if x.finish != nil {
		checks = append(checks, jaegerAttr{"gen_ai.response.finish_reasons", x.finish})
	} else {
		checks = append(checks, jaegerAttr{"gen_ai.response.finish_reasons", jaegerInBody(s.body)})
	}
	if x.noID {
		checks = append(checks, jaegerAttr{"gen_ai.response.id", jaegerAbsent{}})
	} else {
		checks = append(checks, jaegerAttr{"gen_ai.response.id", jaegerInBody(s.body)})
	}
	checks = append(checks, x.extra...)
	if x.stream {
		// The first token cannot reach tokentap before the simulator
		// sends it; the upper bound is only a sanity bound, this test
		// does not measure timing (caddymodule's TestTimingAccuracy does).
		ttft := jaegerTrailerSeconds(t, s.trailer, "Tokentap-Sim-Time-To-First-Token")
		checks = append(checks,
			jaegerAttr{"gen_ai.response.time_to_first_chunk", jaegerFloatIn(0, 30)},
			jaegerAttr{"tokentap.time_to_first_token", jaegerFloatIn(ttft*0.95, ttft+10)},
			jaegerAttr{"tokentap.output_tokens_per_second", jaegerFloatIn(math.SmallestNonzeroFloat64, math.MaxFloat64)},
			jaegerAttr{"tokentap.time_per_output_token", jaegerFloatIn(math.SmallestNonzeroFloat64, 10)},
			jaegerAttr{"tokentap.chunks", jaegerIntAtLeast(sent)},
			jaegerAttr{"tokentap.stalls", jaegerPresent{}},
			jaegerAttr{"tokentap.max_chunk_gap", jaegerFloatIn(0, 30)},
		)
	} else {
		checks = append(checks,
			jaegerAttr{"gen_ai.response.time_to_first_chunk", jaegerAbsent{}},
			jaegerAttr{"tokentap.chunks", jaegerAbsent{}},
		)
	}
	checkJaegerSpanAttributes(t, sp, checks)
}

func checkJaegerSpanAttributes(t *testing.T, sp jaegerSpan, checks []jaegerAttr) {
	t.Helper()
	failed := false
	for _, c := range checks {
		got, ok := sp.Attributes[c.key]
		problem := ""
		switch want := c.want.(type) {
		case jaegerAbsent:
			if ok {
				problem = "want it absent"
			}
		case jaegerPresent:
			if !ok {
				problem = "missing"
			}
		case func(any) string:
			if !ok {
				problem = "missing"
			} else {
				problem = want(got)
			}
		default:
			if !ok {
				problem = fmt.Sprintf("missing, want %#v", want)
			} else if !reflect.DeepEqual(got, want) {
				problem = fmt.Sprintf("want %#v (%T)", want, want)
			}
		}
		if problem != "" {
			failed = true
			t.Errorf("attribute %s = %#v (%T): %s", c.key, got, got, problem)
		}
	}
	if failed {
		keys := make([]string, 0, len(sp.Attributes))
		for k := range sp.Attributes {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "  %s = %#v\n", k, sp.Attributes[k])
		}
		t.Logf("span %s attributes:\n%s", sp, b.String())
	}
}

// outcomeOfStatus is tokentap.outcome of an error status: throttled for
// 429 and 529, upstream_error otherwise.
func outcomeOfStatus(status int) string {
	if status == http.StatusTooManyRequests || status == 529 {
		return "throttled"
	}
	return "upstream_error"
}
