package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
	sink *otlpsink.Sink
	// accessLog is the file of the access log, when the config has one.
	accessLog string

	cmd     *exec.Cmd
	out     *syncBuffer
	exited  chan struct{}
	waitErr error
}

// startClientsTokentap writes caddyfile (with ACCESS_LOG replaced by a file
// in a temporary directory) and runs the binary on it, exporting spans to a
// fresh sink, and waits until every URL in ready answers. The process is
// stopped at the end of the test, and its output logged if the test failed.
func startClientsTokentap(t *testing.T, caddyfile string, ready ...string) *clientsTokentap {
	t.Helper()
	bin := clientsBinary(t)
	dir := t.TempDir()
	p := &clientsTokentap{accessLog: filepath.Join(dir, "access.log"), out: &syncBuffer{}, exited: make(chan struct{})}
	config := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(config, []byte(strings.ReplaceAll(caddyfile, "ACCESS_LOG", p.accessLog)), 0o644); err != nil {
		t.Fatal(err)
	}
	sink, err := otlpsink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.sink = sink
	// Registered before the process's cleanup, so it runs after it: the
	// spans flushed at shutdown still find the sink listening.
	t.Cleanup(sink.Close)

	p.cmd = exec.Command(bin, "run", "--config", config, "--adapter", "caddyfile")
	p.cmd.Dir = dir
	p.cmd.Env = append(clientsEnv(),
		"OTEL_EXPORTER_OTLP_ENDPOINT="+sink.Endpoint(),
		"OTEL_EXPORTER_OTLP_INSECURE=true",
		"OTEL_BSP_SCHEDULE_DELAY=100", // ms: spans reach the sink quickly
		"OTEL_SERVICE_NAME=tokentap-clients-test",
		// Caddy keeps its autosaved config and data under these; the
		// test must not touch the user's.
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_DATA_HOME="+filepath.Join(dir, "data"),
	)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.WaitDelay = clientsStopTimeout
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("tokentap output:\n%s", p.out.String())
		}
	})
	p.waitReady(t, append(ready, "http://localhost:"+clientsAdminPort+"/config/")...)
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

func (p *clientsTokentap) waitReady(t *testing.T, urls ...string) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(clientsStartTimeout)
	for _, url := range urls {
		for {
			res, err := client.Get(url)
			if err == nil {
				res.Body.Close()
				break
			}
			select {
			case <-p.exited:
				t.Fatalf("tokentap exited during startup (%v) before %s answered; output:\n%s", p.waitErr, url, p.out.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not answer within %v of starting tokentap: %v", url, clientsStartTimeout, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// stop interrupts the process, which makes Caddy shut down gracefully and
// tokentap flush its spans, and kills it if it does not exit in time.
func (p *clientsTokentap) stop() error {
	select {
	case <-p.exited:
		return fmt.Errorf("tokentap exited before the test ended: %v", p.waitErr)
	default:
	}
	if err := p.cmd.Process.Signal(os.Interrupt); err == nil {
		select {
		case <-p.exited:
			return nil
		case <-time.After(clientsStopTimeout):
		}
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	return fmt.Errorf("tokentap did not exit within %v of SIGINT and was killed", clientsStopTimeout)
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

// clientsWant is one expected span attribute: the exact value as the sink
// decodes it (string, int64, float64, bool, []any).
type clientsWant struct {
	key  string
	want any
}

// checkClientsSpan compares the span's attributes with what the SDK
// reported, and checks the timings that any completed stream must have.
func checkClientsSpan(t *testing.T, span otlpsink.Span, streamed bool, wants []clientsWant) {
	t.Helper()
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
