package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/otlpsink"
)

// The official-client tests (TestClients*) run the built tokentap binary in
// front of its own simulator and drive it with real SDKs, curl and node, as
// a user would. They use their own addresses, on loopback only, so they can
// run beside the other end-to-end tests: HTTP 9345-9349, admin 2345-2349.
const (
	clientsProxyPort     = "9345"
	clientsSimulatorPort = "9346"
	clientsAdminPort     = "2345"

	clientsProxyURL     = "http://127.0.0.1:" + clientsProxyPort
	clientsSimulatorURL = "http://127.0.0.1:" + clientsSimulatorPort

	clientsStartTimeout = 30 * time.Second
	clientsSpanTimeout  = 15 * time.Second
	clientsStopTimeout  = 5 * time.Second
	// clientsRequestTimeout bounds one SDK call; the simulator's streams
	// in these tests last well under a second.
	clientsRequestTimeout = 30 * time.Second
)

// clientsRequired reports whether missing prerequisites (the binary, node,
// installed npm packages) fail the tests instead of skipping them, as CI
// wants (.ci/e2e-clients sets it).
func clientsRequired() bool { return os.Getenv("TOKENTAP_REQUIRE_E2E") == "1" }

// clientsMissing skips the test for a missing prerequisite, or fails it when
// the prerequisites are required.
func clientsMissing(t *testing.T, format string, args ...any) {
	t.Helper()
	if clientsRequired() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format+" (set TOKENTAP_REQUIRE_E2E=1 to make this a failure)", args...)
}

// clientsBinary is the tokentap binary under test, from TOKENTAP_BINARY.
func clientsBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("TOKENTAP_BINARY")
	if bin == "" {
		clientsMissing(t, "set TOKENTAP_BINARY to a built tokentap binary, e.g. from the repository root: "+
			"go build -o /tmp/tokentap ./cmd/tokentap && TOKENTAP_BINARY=/tmp/tokentap go test -run '^TestClients' ./e2e/ (or run .ci/e2e-clients)")
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("TOKENTAP_BINARY=%s is not an executable file (stat error: %v)", bin, err)
	}
	return bin
}

// clientsRepoRoot is the repository root, one level up from this package.
func clientsRepoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"go.mod", "Caddyfile"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Fatalf("%s is not the repository root: %v", root, err)
		}
	}
	return root
}

// clientsCaddyfile is the configuration of the SDK and access log tests:
// /sim/* measures the simulator, /inject/* does so with inject_usage, and
// the access log goes as JSON to the file named by the placeholder
// ACCESS_LOG, with two log_append fields fed by tokentap's placeholders.
// The simulator is fast, so that the tests take little time, and has no
// jitter, so that the same request always gets the same bytes.
const clientsCaddyfile = `{
	admin localhost:` + clientsAdminPort + `
	default_bind 127.0.0.1
}

:` + clientsProxyPort + ` {
	log {
		output file ACCESS_LOG
		format json
	}
	log_append sdk_output_tokens {http.vars.tokentap.output_tokens}
	log_append sdk_time_to_first_token {http.vars.tokentap.time_to_first_token}

	handle_path /sim/* {
		tokentap
		reverse_proxy 127.0.0.1:` + clientsSimulatorPort + `
	}
	handle_path /inject/* {
		tokentap {
			inject_usage
		}
		reverse_proxy 127.0.0.1:` + clientsSimulatorPort + `
	}
}

http://:` + clientsSimulatorPort + ` {
	tokentap_simulator {
		time_to_first_token 30ms
		tokens_per_second 400
		output_tokens 16
	}
}
`

// clientsTokentap is a running tokentap binary with the OTLP sink it exports
// its spans to.
type clientsTokentap struct {
	*tokentapProc
	sink *otlpsink.Sink
	// accessLog is the file of the access log, when the config has one.
	accessLog string
}

// startClientsTokentap writes caddyfile (with ACCESS_LOG replaced by a file
// in a temporary directory) and runs the binary on it, exporting spans to a
// fresh sink, and waits until every URL in ready answers. The process is
// stopped at the end of the test, and its output logged if the test failed.
func startClientsTokentap(t *testing.T, caddyfile string, ready ...string) *clientsTokentap {
	t.Helper()
	bin := clientsBinary(t)
	dir := t.TempDir()
	p := &clientsTokentap{accessLog: filepath.Join(dir, "access.log")}
	sink, err := otlpsink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.sink = sink
	// Registered before the process's cleanup, so it runs after it: the
	// spans flushed at shutdown still find the sink listening.
	t.Cleanup(sink.Close)

	p.tokentapProc = startTokentapProc(t, tokentapRun{
		name:      "tokentap",
		bin:       bin,
		dir:       dir,
		caddyfile: strings.ReplaceAll(caddyfile, "ACCESS_LOG", p.accessLog),
		env: append(clientsEnv(),
			"OTEL_EXPORTER_OTLP_ENDPOINT="+sink.Endpoint(),
			"OTEL_EXPORTER_OTLP_INSECURE=true",
			"OTEL_BSP_SCHEDULE_DELAY=100", // ms: spans reach the sink quickly
			"OTEL_SERVICE_NAME=tokentap-clients-test",
		),
		waitDelay:   clientsStopTimeout,
		stopTimeout: clientsStopTimeout,
		afterStop: func(out string) {
			if t.Failed() {
				t.Logf("tokentap output:\n%s", out)
			}
		},
	})
	p.waitReady(t, clientsStartTimeout, append(ready, "http://localhost:"+clientsAdminPort+"/config/")...)
	return p
}

// clientsEnv is the test process's environment without what would change
// the behaviour of tokentap or of the SDKs behind the test's back: OTEL_*
// (an endpoint or sampler of the user's), and the SDKs' own variables
// (a base URL or custom headers of the user's).
func clientsEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		for _, prefix := range []string{"OTEL_", "OPENAI_", "ANTHROPIC_"} {
			if strings.HasPrefix(kv, prefix) {
				return true
			}
		}
		return false
	})
}

// clientsTrace is a W3C trace context for one request. tokentap continues
// the trace a request carries, so the span of a request made with this
// header is the one span of the sink with this trace id, whatever else
// arrives: that is how each test finds the span of each of its requests.
type clientsTrace struct {
	traceID     string
	traceparent string
}

func newClientsTrace(t *testing.T) clientsTrace {
	t.Helper()
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	traceID, parent := hex.EncodeToString(b[:16]), hex.EncodeToString(b[16:])
	return clientsTrace{traceID: traceID, traceparent: "00-" + traceID + "-" + parent + "-01"}
}

// span waits for the span tokentap exported for the request that carried
// tr, and checks the trace was continued.
func (p *clientsTokentap) span(t *testing.T, tr clientsTrace) otlpsink.Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientsSpanTimeout)
	defer cancel()
	span, err := p.sink.WaitFor(ctx, func(s otlpsink.Span) bool { return s.TraceID == tr.traceID })
	if err != nil {
		t.Fatalf("no span with trace id %s within %v: %v", tr.traceID, clientsSpanTimeout, err)
	}
	if span.Kind != "client" || span.Scope != "github.com/tokentap/tokentap" {
		t.Errorf("span %s: kind %q scope %q, want tokentap's client span", span, span.Kind, span.Scope)
	}
	return span
}

// clientsStreamModes are the two ways the SDK tests make each call: the
// span and what the SDK assembles must agree either way.
var clientsStreamModes = []struct {
	name   string
	stream bool
}{
	{"not streamed", false},
	{"streamed", true},
}

// clientsResult is what an SDK made of one answer: the result an
// application reads (assembled), and the raw chunks or events it received.
type clientsResult[R any] interface {
	assembled() R
	received() []string
}

// checkSameAsDirect fails the test unless the SDK made the same of the
// answer through tokentap (proxied) as directly from the simulator: the
// same result from the same raw chunks or events (what says which), since
// tokentap must pass every byte through unchanged. The check is the same for
// every SDK, so it is written once.
func checkSameAsDirect[R clientsResult[R]](t *testing.T, proxied, direct R, what string) {
	t.Helper()
	if !reflect.DeepEqual(proxied.assembled(), direct.assembled()) {
		t.Errorf("through tokentap the SDK assembled\n%+v\ndirectly from the simulator\n%+v", proxied.assembled(), direct.assembled())
	}
	if p, d := proxied.received(), direct.received(); !reflect.DeepEqual(p, d) {
		t.Errorf("through tokentap the SDK received %d %s that differ from the %d received directly:\n%s\nvs\n%s",
			len(p), what, len(d), strings.Join(p, "\n"), strings.Join(d, "\n"))
	}
}

// clientsWant is one expected span attribute: the exact value as the sink
// decodes it (string, int64, float64, bool, []any).
type clientsWant struct {
	key  string
	want any
}

// checkClientsSpan compares the span's attributes with what the SDK
// reported, and checks what the span of any completed stream must have:
// gen_ai.request.stream and the timings.
func checkClientsSpan(t *testing.T, span otlpsink.Span, streamed bool, wants []clientsWant) {
	t.Helper()
	if streamed {
		wants = append(wants, clientsWant{"gen_ai.request.stream", true})
	}
	a := span.Attributes
	t.Logf("span %s: %v input and %v output tokens (%v), time to first token %v s, %v output tokens/s, outcome %v",
		span.Name, a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"], a["tokentap.usage.source"],
		a["tokentap.time_to_first_token"], a["tokentap.output_tokens_per_second"], a["tokentap.outcome"])
	for _, w := range wants {
		got, ok := span.Attributes[w.key]
		if !ok {
			t.Errorf("span %s has no %s; want %v", span, w.key, w.want)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(w.want) || fmt.Sprintf("%T", got) != fmt.Sprintf("%T", w.want) {
			t.Errorf("span %s: %s = %v (%T), want %v (%T)", span, w.key, got, got, w.want, w.want)
		}
	}
	if span.Attributes["tokentap.outcome"] != "completed" {
		t.Errorf("span %s: tokentap.outcome %v, want completed", span, span.Attributes["tokentap.outcome"])
	}
	if streamed {
		for _, key := range []string{"tokentap.time_to_first_token", "tokentap.output_tokens_per_second"} {
			if v, ok := span.Attributes[key].(float64); !ok || v <= 0 {
				t.Errorf("span %s: %s = %v, want a positive number for a completed stream", span, key, span.Attributes[key])
			}
		}
	}
}
