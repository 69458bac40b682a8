package caddymodule

import (
	"context"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/testutil/measuretest"
)

// The handlers this package's tests provision, in unit harnesses and in
// the real Caddy of the integration tests, get the real MeterProvider
// pipeline with its Prometheus reader but push to no OTLP endpoint: there
// is none, and every final flush would wait for the exporter's timeout.
// (An init, not TestMain, so that this file owns the setting.)
func init() {
	otelexport.MetricReadersOverride = func(...sdkmetric.ReaderOption) []sdkmetric.Reader { return nil }
}

// withoutOverride runs a test against the TracerProvider that the
// environment describes rather than the tests' in-memory one.
func withoutOverride(t *testing.T) {
	saved := otelexport.TracerProviderOverride
	otelexport.TracerProviderOverride = nil
	t.Cleanup(func() { otelexport.TracerProviderOverride = saved })
	if tr, _ := otelexport.Holders(); tr != 0 {
		t.Fatalf("%d holders of the shared TracerProvider before the test; it would not be rebuilt", tr)
	}
}

// The span attribute keys the tests look for, spelled out here rather than
// taken from otelexport, so that renaming one there fails a test:
// dashboards depend on these names (docs/telemetry.md).
const (
	attrTimeToFirstToken      = attribute.Key("tokentap.time_to_first_token")
	attrOutputTokensPerSecond = attribute.Key("tokentap.output_tokens_per_second")
	attrUsageSource           = attribute.Key("tokentap.usage.source")
	attrOutcome               = attribute.Key("tokentap.outcome")
	attrDialect               = attribute.Key("tokentap.dialect")
	attrDegradedReason        = attribute.Key("tokentap.degraded.reason")
	attrContentTruncated      = attribute.Key("tokentap.content.truncated")
)

// sinkNamed returns the provisioned handler's sink of that name.
func sinkNamed(t testing.TB, h *Handler, name string) sink.Sink {
	t.Helper()
	for _, s := range h.cfg.Sinks {
		if s.Name == name {
			return s.Sink
		}
	}
	t.Fatalf("no %s sink", name)
	return nil
}

// TestHandlerMetricsOnCaddyRegistry: a provisioned handler's metrics appear
// on its config's registry under their Prometheus names, and leave it with
// the handler.
func TestHandlerMetricsOnCaddyRegistry(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	h := &Handler{}
	if err := h.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	reg := ctx.GetMetricsRegistry()
	sinkNamed(t, h, "metrics").Record(&sink.Result{Ctx: context.Background(), M: measuretest.Streamed(), Provider: "registry-test", Host: "api.openai.com", Port: 443,
		Labels: []sink.Label{{Name: "team", Value: "search"}}})

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Caddy's registry fails to gather: %v", err)
	}
	series := map[string]*dto.Metric{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["gen_ai_provider_name"] == "registry-test" {
				series[mf.GetName()+"/"+labels["gen_ai_token_type"]] = m
				if mf.GetType() != dto.MetricType_HISTOGRAM {
					t.Errorf("%s is a %v", mf.GetName(), mf.GetType())
				}
				for k, want := range map[string]string{
					"gen_ai_operation_name": "chat", "gen_ai_request_model": "gpt-4o-mini",
					"gen_ai_response_model": "gpt-4o-mini-2024-07-18", "server_address": "api.openai.com",
					"server_port": "443", "tokentap_usage_source": "reported", "tokentap_label_team": "search",
					"otel_scope_name": otelexport.InstrumentationName,
				} {
					if labels[k] != want {
						t.Errorf("%s: label %s=%q, want %q", mf.GetName(), k, labels[k], want)
					}
				}
			}
		}
	}
	for _, name := range []string{
		"gen_ai_client_operation_duration_seconds/",
		"gen_ai_client_operation_time_to_first_chunk_seconds/",
		"gen_ai_client_operation_time_per_output_chunk_seconds/",
		"gen_ai_client_token_usage/input",
		"gen_ai_client_token_usage/output",
		"tokentap_time_to_first_token_seconds/",
		// The unit {token}/s adds _per_second to a name that has it
		// already: the standard translation, the same through an
		// OpenTelemetry Collector's Prometheus exporter.
		"tokentap_output_token_rate_per_second/",
	} {
		if series[name] == nil {
			t.Errorf("no %s series; have %v", name, seriesNames(series))
		}
	}
	if err := h.Cleanup(); err != nil {
		t.Fatal(err)
	}
	mfs, err = reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "gen_ai_") || strings.HasPrefix(mf.GetName(), "tokentap_") {
			t.Errorf("%s still on the registry after Cleanup", mf.GetName())
		}
	}
}

func seriesNames(m map[string]*dto.Metric) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
