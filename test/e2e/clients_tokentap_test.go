package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/testutil/otlpsink"
	"github.com/tokentap/tokentap/internal/testutil/testbin"
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
	*testbin.Process
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
	bin := testbin.Binary(t)
	p := &clientsTokentap{accessLog: filepath.Join(t.TempDir(), "access.log")}
	sink, err := otlpsink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.sink = sink
	// Registered before the process's cleanup, so it runs after it: the
	// spans flushed at shutdown still find the sink listening.
	t.Cleanup(sink.Close)

	p.Process = testbin.Start(t, testbin.Config{
		Bin:       bin,
		Caddyfile: strings.ReplaceAll(caddyfile, "ACCESS_LOG", p.accessLog),
		Env: append(clientsEnv(),
			"OTEL_EXPORTER_OTLP_ENDPOINT="+sink.Endpoint(),
			"OTEL_EXPORTER_OTLP_INSECURE=true",
			"OTEL_BSP_SCHEDULE_DELAY=100", // ms: spans reach the sink quickly
			"OTEL_SERVICE_NAME=tokentap-clients-test",
		),
		StopTimeout: clientsStopTimeout,
		AfterStop: func(out string) {
			if t.Failed() {
				t.Logf("tokentap output:\n%s", out)
			}
		},
	})
	p.WaitReady(t, clientsStartTimeout, append(ready, "http://localhost:"+clientsAdminPort+"/config/")...)
	return p
}

// clientsEnv is the test process's environment without what would change
// the behaviour of tokentap or of the SDKs behind the test's back: OTEL_*
// (an endpoint or sampler of the user's), and the SDKs' own variables
// (a base URL or custom headers of the user's).
func clientsEnv() []string { return testbin.Environ("OTEL_", "OPENAI_", "ANTHROPIC_") }

// span waits for the span tokentap exported for the request that carried
// tr, and checks the trace was continued.
func (p *clientsTokentap) span(t *testing.T, tr testbin.Trace) otlpsink.Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientsSpanTimeout)
	defer cancel()
	span, err := p.sink.WaitFor(ctx, func(s otlpsink.Span) bool { return s.TraceID == tr.ID })
	if err != nil {
		t.Fatalf("no span with trace id %s within %v: %v", tr.ID, clientsSpanTimeout, err)
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
