package otelexport

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/testutil/measuretest"
	"github.com/tokentap/tokentap/internal/testutil/otlpsink"
)

// The handlers this package's tests provision, in unit harnesses and in
// the real Caddy of the integration tests, get the real MeterProvider
// pipeline with its Prometheus reader but push to no OTLP endpoint: there
// is none, and every final flush would wait for the exporter's timeout.
// (An init, not TestMain, so that this file owns the setting.) Tests of
// the exporters themselves clear it with withoutMetricReadersOverride.
func init() {
	MetricReadersOverride = func(...sdkmetric.ReaderOption) []sdkmetric.Reader { return nil }
}

// withoutMetricReadersOverride runs a test against the real pipeline
// construction, with the shared state of other tests set aside.
func withoutMetricReadersOverride(t *testing.T) {
	saved := MetricReadersOverride
	MetricReadersOverride = nil
	sharedMeterProvider.setAside(t)
	t.Cleanup(func() { MetricReadersOverride = saved })
	for _, k := range []string{"OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
		"OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", histogramAggregationEnv} {
		t.Setenv(k, "")
	}
}

func TestNewMeterPipelineFromEnv(t *testing.T) {
	tests := []struct {
		name        string
		env         map[string]string
		wantEnabled bool
		wantErr     string
	}{
		{"default is otlp over gRPC", nil, true, ""},
		{"none: Prometheus only", map[string]string{"OTEL_METRICS_EXPORTER": "none"}, true, ""},
		{"prometheus: Caddy's /metrics", map[string]string{"OTEL_METRICS_EXPORTER": "prometheus"}, true, ""},
		{"console", map[string]string{"OTEL_METRICS_EXPORTER": "console"}, true, ""},
		{"a list", map[string]string{"OTEL_METRICS_EXPORTER": "otlp, console"}, true, ""},
		{"http/protobuf", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, true, ""},
		{"metrics protocol wins", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "bogus", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"}, true, ""},
		{"temporality preference", map[string]string{"OTEL_METRICS_EXPORTER": "console", "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "delta"}, true, ""},
		{"unknown exporter", map[string]string{"OTEL_METRICS_EXPORTER": "statsd"}, false, `OTEL_METRICS_EXPORTER "statsd" is not supported`},
		{"unknown protocol", map[string]string{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/json"}, false, `"http/json" is not supported`},
		{"unknown exporter after a good one", map[string]string{"OTEL_METRICS_EXPORTER": "otlp,zipkin"}, false, `"zipkin" is not supported`},
		{"SDK disabled", map[string]string{"OTEL_SDK_DISABLED": "true"}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withoutMetricReadersOverride(t)
			ignore := goleak.IgnoreCurrent()
			// The final flush of the OTLP cases goes to a port of this
			// test's range where nothing listens.
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4333")
			t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			restore := captureStderr(t)
			p, err := newMeterPipeline(context.Background(), zap.NewNop())
			restore()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				// The readers built before the bad name were shut down.
				goleak.VerifyNone(t, ignore)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Instruments.enabled != tt.wantEnabled || (p.collector != nil) != tt.wantEnabled {
				t.Errorf("enabled %v, collector %v; want enabled %v", p.Instruments.enabled, p.collector, tt.wantEnabled)
			}
			if p.shutdown != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				_ = p.shutdown(ctx)
			}
			goleak.VerifyNone(t, ignore)
		})
	}
}

// TestConsoleExporter: OTEL_METRICS_EXPORTER=console writes the points to
// stderr when the provider is flushed.
func TestConsoleExporter(t *testing.T) {
	withoutMetricReadersOverride(t)
	t.Setenv("OTEL_METRICS_EXPORTER", "console")
	restore := captureStderr(t)
	p, release, err := AcquireMeterProvider(context.Background(), zap.NewNop())
	output := restore()
	if err != nil {
		t.Fatal(err)
	}
	p.Instruments.Record(&sink.Result{Ctx: context.Background(), M: measuretest.Streamed(), Provider: "openai"})
	release()
	b := output()
	for _, want := range []string{"gen_ai.client.operation.duration", "tokentap.output_token_rate", `"service.name"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("console output lacks %s:\n%.2000s", want, b)
		}
	}
}

// captureStderr points os.Stderr at a file until the returned function is
// called; exporters built meanwhile keep writing there. That function
// returns one that reads what was written.
func captureStderr(t *testing.T) func() func() []byte {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stderr
	os.Stderr = f
	return func() func() []byte {
		os.Stderr = saved
		return func() []byte {
			b, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

// TestSharedMeterProviderLifetime: handlers share one provider; it keeps
// its points while any holds it, and the last release flushes them to a
// real OTLP endpoint (gRPC or HTTP) with the traces' resource, then shuts
// down without leaving goroutines.
func TestSharedMeterProviderLifetime(t *testing.T) {
	tests := []struct {
		name            string
		protocol        string
		temporality     string
		wantTemporality string
	}{
		{"grpc", "grpc", "", "cumulative"},
		{"http/protobuf", "http/protobuf", "", "cumulative"},
		{"grpc, delta temporality", "grpc", "delta", "delta"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withoutMetricReadersOverride(t)
			ignore := goleak.IgnoreCurrent()
			start := otlpsink.Start
			if tt.protocol == "http/protobuf" {
				start = otlpsink.StartHTTP
			}
			collector, err := start("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.Endpoint())
			t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
			t.Setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", tt.protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", tt.temporality)
			// Only a flush can deliver within the test.
			t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "600000")
			t.Setenv("OTEL_SERVICE_NAME", "gateway-eu")
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=staging")

			logger := zap.NewNop()
			p1, release1, err := AcquireMeterProvider(context.Background(), logger)
			if err != nil {
				t.Fatal(err)
			}
			p2, release2, err := AcquireMeterProvider(context.Background(), logger)
			if err != nil {
				t.Fatal(err)
			}
			if p1 != p2 || p1.Instruments != p2.Instruments {
				t.Fatal("two handlers got two pipelines")
			}
			ctx, sc := metricSpanContext(t, true)
			f := &sink.Result{Ctx: ctx, M: measuretest.Streamed(), Provider: "openai", Host: "api.openai.com", Port: 443}
			p1.Instruments.Record(f)
			release1()
			release1() // idempotent: Caddy may clean up twice after a failed load
			if n := len(collector.Metrics()); n != 0 {
				t.Fatalf("%d metrics exported before the last release", n)
			}
			p2.Instruments.Record(f)
			release2()

			ms := collector.Metrics()
			var dur *otlpsink.Metric
			for i := range ms {
				if ms[i].Name == "gen_ai.client.operation.duration" {
					dur = &ms[i]
				}
			}
			if dur == nil {
				t.Fatalf("no duration among %v", ms)
			}
			if dur.Temporality != tt.wantTemporality || dur.Scope != InstrumentationName {
				t.Errorf("temporality %q scope %q", dur.Temporality, dur.Scope)
			}
			if dur.Resource["service.name"] != "gateway-eu" || dur.Resource["deployment.environment.name"] != "staging" {
				t.Errorf("resource %v: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES must win", dur.Resource)
			}
			if len(dur.Points) != 1 || dur.Points[0].Count != 2 || dur.Points[0].Sum != 2.4 {
				t.Fatalf("points %+v, want one with both exchanges", dur.Points)
			}
			pt := dur.Points[0]
			if pt.Attributes["gen_ai.request.model"] != "gpt-4o-mini" || pt.Attributes["server.port"] != int64(443) {
				t.Errorf("attributes %v", pt.Attributes)
			}
			if len(pt.Exemplars) == 0 || pt.Exemplars[0].TraceID != sc.TraceID().String() {
				t.Errorf("exemplars %+v, want the span's trace %s", pt.Exemplars, sc.TraceID())
			}
			if !sharedMeterProvider.empty() {
				t.Errorf("%d holders of the pipeline after the last release", sharedMeterProvider.holders())
			}
			// Recording after shutdown is harmless and exports nothing.
			p2.Instruments.Record(f)
			collector.Close()
			if n := len(collector.Metrics()); n != len(ms) {
				t.Errorf("%d metrics after shutdown, %d before", n, len(ms))
			}
			goleak.VerifyNone(t, ignore)
		})
	}
}

// TestMetricExportFailuresLogged: a collector that is down costs one log
// line a minute, not one per export, and the handler's pipeline keeps
// working.
func TestMetricExportFailuresLogged(t *testing.T) {
	withoutMetricReadersOverride(t)
	ignore := goleak.IgnoreCurrent()
	// Nothing listens on this port of this test's range.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4332")
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "200")
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "50")
	t.Setenv("OTEL_METRIC_EXPORT_TIMEOUT", "200")
	core, logs := observer.New(zapcore.WarnLevel)
	p, release, err := AcquireMeterProvider(context.Background(), zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	f := &sink.Result{Ctx: context.Background(), M: measuretest.Streamed(), Provider: "openai"}
	deadline := time.Now().Add(10 * time.Second)
	for logs.FilterMessageSnippet("exporting metrics failed").Len() == 0 && time.Now().Before(deadline) {
		p.Instruments.Record(f)
		time.Sleep(20 * time.Millisecond)
	}
	// Several more intervals fail while the limit holds.
	time.Sleep(500 * time.Millisecond)
	release()
	failed := logs.FilterMessageSnippet("exporting metrics failed").All()
	if len(failed) != 1 {
		t.Fatalf("%d failure lines, want 1 (rate limited): %v", len(failed), failed)
	}
	if other := logs.Len() - len(failed); other != 0 {
		t.Errorf("%d other warnings: %v", other, logs.All())
	}
	goleak.VerifyNone(t, ignore)
}

// TestExportLogLimit: the limiter logs the first failure, counts the ones
// within the interval, and reports that count with the next line it logs.
func TestExportLogLimit(t *testing.T) {
	tests := []struct {
		name      string
		every     time.Duration
		failures  int
		wantLines int
		wantLast  int64
	}{
		{"one failure", time.Hour, 1, 1, 0},
		{"a burst within the interval", time.Hour, 10, 1, 0},
		{"no limit", 0, 3, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.WarnLevel)
			l := &exportLog{logger: zap.New(core), every: tt.every}
			for range tt.failures {
				l.failed(context.DeadlineExceeded)
			}
			if got := logs.Len(); got != tt.wantLines {
				t.Errorf("%d lines, want %d", got, tt.wantLines)
			}
			if got := logs.All()[logs.Len()-1].ContextMap()["failures_not_logged"]; got != tt.wantLast {
				t.Errorf("failures_not_logged %v, want %d", got, tt.wantLast)
			}
			// Once the interval has passed, the next line carries the
			// count of those that were not logged.
			l.mu.Lock()
			l.last = l.last.Add(-2 * max(tt.every, time.Second))
			l.mu.Unlock()
			l.failed(context.DeadlineExceeded)
			want := int64(0)
			if tt.every > 0 {
				want = int64(tt.failures - 1)
			}
			if got := logs.All()[logs.Len()-1].ContextMap()["failures_not_logged"]; got != want {
				t.Errorf("after the interval: failures_not_logged %v, want %d", got, want)
			}
		})
	}
}

// TestPrometheusRegistration: the collector is registered once per Caddy
// registry however many handlers a config has, leaves it when the last of
// them goes, and can be registered in the next config's registry.
func TestPrometheusRegistration(t *testing.T) {
	p, release, err := AcquireMeterProvider(context.Background(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	p.Instruments.Record(&sink.Result{Ctx: context.Background(), M: measuretest.Streamed(), Provider: "registration-test"})
	has := func(reg *prometheus.Registry) bool {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("gather: %v", err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "gen_ai_client_operation_duration_seconds" {
				return true
			}
		}
		return false
	}
	core, logs := observer.New(zapcore.WarnLevel)
	logger := zap.New(core)
	first := prometheus.NewPedanticRegistry()
	u1 := p.Register(first, logger)
	u2 := p.Register(first, logger) // a second handler of the same config
	if !has(first) {
		t.Fatal("not on the registry")
	}
	u1()
	u1()
	if !has(first) {
		t.Error("gone while a handler of the config remains")
	}
	next := prometheus.NewPedanticRegistry() // a reload
	u3 := p.Register(next, logger)
	if !has(next) {
		t.Error("not on the reloaded config's registry")
	}
	u2()
	if has(first) {
		t.Error("still on the registry after its last handler went")
	}
	u3()
	// A handler provisioned later into a registry whose handlers all went
	// registers a new gate; the old one stays closed, so nothing doubles.
	u4 := p.Register(first, logger)
	if !has(first) {
		t.Error("not back on the registry")
	}
	if _, err := first.Gather(); err != nil {
		t.Errorf("duplicate series after re-registering: %v", err)
	}
	u4()
	if logs.Len() != 0 {
		t.Errorf("warnings: %v", logs.All())
	}
	if p.registries[first] != nil || p.registries[next] != nil {
		t.Error("registries of gone configs are still referenced")
	}
}

func metricKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
