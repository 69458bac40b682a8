package caddymodule

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/testutil/otlpsink"
)

// The fault tests (faults_*_test.go) run tokentap in this process's Caddy,
// in front of a real reverse_proxy, with the real trace pipeline exporting
// over OTLP/gRPC to an in-process sink: what a fault does to a span is read
// where a collector would read it. They use their own loopback ports, so
// they never meet the integration tests' Caddy (2999, 9080/9081) or another
// package's tests; each test loads its own config and stops Caddy when done.
const (
	faultsAdminAddr    = "localhost:2400"
	faultsProxyAddr    = "127.0.0.1:9400"
	faultsSimAddr      = "127.0.0.1:9401"
	faultsUpstreamAddr = "127.0.0.1:9402"
	faultsTLSAddr      = "127.0.0.1:9403"
	faultsOTLPAddr     = "127.0.0.1:4400"

	faultsProxyURL = "http://" + faultsProxyAddr
	faultsSimURL   = "http://" + faultsSimAddr
)

// faultsGlobal is the global options block of every fault config: the
// tests' own admin address, no trust store changes, a grace period (GRACE:
// short, so that stopping Caddy never waits long on a stream a test left
// hanging, unless the test reloads under streams), and the log as JSON in a
// file the test can search (LOGFILE).
const faultsGlobal = `{
	admin ` + faultsAdminAddr + `
	skip_install_trust
	http_port 9400
	https_port 9403
	grace_period GRACE
	servers {
		protocols h1 h2 h2c
	}
	log {
		output file LOGFILE
		format json
		level INFO
	}
}
`

// faultsCaddy is a config running in this process's Caddy.
type faultsCaddy struct {
	logFile string
	grace   string
}

// config is the whole Caddyfile for site.
func (fc *faultsCaddy) config(site string) string {
	return strings.NewReplacer("LOGFILE", fc.logFile, "GRACE", fc.grace).Replace(faultsGlobal) + site
}

// faultsService is the service.name of this process's spans: another
// process running these tests at the same moment exports to the same port,
// and its spans must not be counted as this one's.
var faultsService = fmt.Sprintf("tokentap-faults-%d", os.Getpid())

// faultsExportEnv points the real trace pipeline at endpoint, with a short
// batch delay so spans arrive quickly. The metric pipeline pushes nowhere:
// these tests are about traffic and spans.
func faultsExportEnv(t *testing.T, endpoint string) {
	t.Helper()
	for k, v := range map[string]string{
		"OTEL_SDK_DISABLED":                  "",
		"OTEL_TRACES_EXPORTER":               "otlp",
		"OTEL_METRICS_EXPORTER":              "none",
		"OTEL_EXPORTER_OTLP_ENDPOINT":        endpoint,
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "",
		"OTEL_EXPORTER_OTLP_PROTOCOL":        "grpc",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "",
		"OTEL_EXPORTER_OTLP_INSECURE":        "true",
		"OTEL_TRACES_SAMPLER":                "",
		"OTEL_BSP_SCHEDULE_DELAY":            "50",
		"OTEL_SERVICE_NAME":                  faultsService,
	} {
		t.Setenv(k, v)
	}
}

// startFaultsCaddy stops whatever config this process's Caddy runs, sets
// the trace pipeline up from the environment (call faultsExportEnv first)
// instead of the in-memory recorder of the other tests, and loads site
// (Caddyfile site blocks, after faultsGlobal). It waits until the proxy
// answers, and at the end of the test stops Caddy and checks that every
// handler let go of the shared providers.
func startFaultsCaddy(t *testing.T, site string) *faultsCaddy {
	t.Helper()
	return startFaultsCaddyGrace(t, site, "2s")
}

// startFaultsCaddyGrace is startFaultsCaddy with the given grace period.
func startFaultsCaddyGrace(t *testing.T, site, grace string) *faultsCaddy {
	t.Helper()
	if testing.Short() {
		t.Skip("fault test: runs a real Caddy")
	}
	stopCaddyAndSettle(t)
	// Caddy listens with SO_REUSEPORT, so a second process loading a
	// config on the same ports would silently share them with this one;
	// a plain listen fails while anyone holds them.
	for _, addr := range []string{faultsProxyAddr, faultsSimAddr, faultsTLSAddr} {
		ln := listenFaults(t, addr)
		ln.Close()
	}
	withoutOverride(t)
	dir := t.TempDir()
	// Caddy autosaves the config and keeps its storage under these; the
	// tests must not touch the user's.
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	fc := &faultsCaddy{logFile: filepath.Join(dir, "caddy.log"), grace: grace}
	loadFaultsConfig(t, fc.config(site))
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		stopCaddyAndSettle(t)
		if t.Failed() {
			if b, err := os.ReadFile(fc.logFile); err == nil {
				t.Logf("Caddy's log:\n%s", lastLines(string(b), 60))
			}
		}
	})
	waitAnswers(t, faultsProxyURL+"/")
	return fc
}

// loadFaultsConfig adapts a Caddyfile and loads it, as POST /load does.
func loadFaultsConfig(t *testing.T, caddyfile string) {
	t.Helper()
	adapter := caddyconfig.GetAdapter("caddyfile")
	cfgJSON, warnings, err := adapter.Adapt([]byte(caddyfile), nil)
	if err != nil {
		t.Fatalf("adapting the fault config: %v\n%s", err, caddyfile)
	}
	for _, w := range warnings {
		t.Logf("Caddyfile warning: %s", w)
	}
	if err := caddy.Load(cfgJSON, true); err != nil {
		t.Fatalf("loading the fault config: %v", err)
	}
}

// stopCaddyAndSettle stops the running config and waits until every
// tokentap handler has released the shared TracerProvider and
// MeterProvider (its last exchange may end a moment after the config is
// gone).
func stopCaddyAndSettle(t *testing.T) {
	t.Helper()
	if err := caddy.Stop(); err != nil {
		t.Fatalf("stopping Caddy: %v", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		traceRefs, meterRefs := providerRefs()
		if traceRefs == 0 && meterRefs == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d TracerProvider and %d MeterProvider references left after stopping Caddy", traceRefs, meterRefs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// providerRefs is how many handlers hold the shared providers.
func providerRefs() (traceRefs, meterRefs int) {
	return otelexport.Holders()
}

// waitAnswers waits until url answers HTTP at all, so that a test's first
// request meets a running server, not a refused connection. The stats
// tests wait for their instances with it too.
func waitAnswers(t *testing.T, url string) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not answer: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// log returns Caddy's log so far.
func (fc *faultsCaddy) log(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(fc.logFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// lastLines returns the last n lines of s: the end of a log or an output is
// where a failure shows, and all of it would drown the test's report.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// startFaultsSink starts the OTLP/gRPC sink on the fault tests' OTLP port,
// retrying briefly: a previous test's sink may have just released it.
func startFaultsSink(t *testing.T) *otlpsink.Sink {
	t.Helper()
	var lastErr error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		sink, err := otlpsink.Start(faultsOTLPAddr)
		if err == nil {
			return sink
		}
		lastErr = err
	}
	t.Fatalf("starting the OTLP sink: %v", lastErr)
	return nil
}

// traceContext is a W3C traceparent for one request: tokentap continues the
// trace a request carries, so the request's span is the one with this
// trace id, whatever else the sink receives.
type traceContext struct {
	traceID, header string
}

func newTraceContext(t testing.TB) traceContext {
	t.Helper()
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(b[:16])
	return traceContext{traceID: id, header: "00-" + id + "-" + hex.EncodeToString(b[16:]) + "-01"}
}

// waitSpan waits for the span of the request that carried tc.
func waitSpan(t *testing.T, sink *otlpsink.Sink, tc traceContext, timeout time.Duration) otlpsink.Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := sink.WaitFor(ctx, func(s otlpsink.Span) bool { return s.TraceID == tc.traceID })
	if err != nil {
		// The sink's error lists every span it has; the count says enough.
		t.Fatalf("no span for trace %s within %v; the sink has %d others", tc.traceID, timeout, len(sink.Spans()))
	}
	return s
}

// readHash reads r to its end, hashing it without keeping it, so a test
// can compare many megabytes without holding them.
func readHash(r io.Reader) (sum [32]byte, n int64, err error) {
	h := sha256.New()
	n, err = io.Copy(h, r)
	copy(sum[:], h.Sum(nil))
	return sum, n, err
}

// goroutinesSettle waits until the process has at most baseline+slack
// goroutines, and fails with a dump if it does not within the timeout.
func goroutinesSettle(t *testing.T, baseline, slack int, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		n := runtime.NumGoroutine()
		if n <= baseline+slack {
			return n
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 4<<20)
			t.Fatalf("%d goroutines, baseline %d (+%d allowed)\n%s", n, baseline, slack, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// listenFaults listens on one of the fault tests' fixed addresses, retrying
// briefly while a previous test's listener is still closing.
func listenFaults(t *testing.T, addr string) net.Listener {
	t.Helper()
	var lastErr error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln
		}
		lastErr = err
	}
	t.Fatalf("listening on %s: %v", addr, lastErr)
	return nil
}
