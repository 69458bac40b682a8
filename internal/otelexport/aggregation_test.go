package otelexport

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/testutil/measuretest"
)

// TestHistogramAggregationFromEnv: the specification's variable turns every
// histogram exponential on the push readers and native on Caddy's
// /metrics; unset, explicit or unknown, the instruments keep their own
// buckets (an unknown value with a warning).
func TestHistogramAggregationFromEnv(t *testing.T) {
	tests := []struct {
		name        string
		value       string
		exponential bool
		warns       bool
	}{
		{"unset: explicit buckets", "", false, false},
		{"explicit_bucket_histogram", "explicit_bucket_histogram", false, false},
		{"base2_exponential_bucket_histogram", "base2_exponential_bucket_histogram", true, false},
		{"case and spaces do not matter", " Base2_Exponential_Bucket_Histogram ", true, false},
		{"unknown value: explicit, with a warning", "exponential", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withoutMetricReadersOverride(t)
			t.Setenv(histogramAggregationEnv, tt.value)
			var push *sdkmetric.ManualReader
			MetricReadersOverride = func(opts ...sdkmetric.ReaderOption) []sdkmetric.Reader {
				push = sdkmetric.NewManualReader(manualOptions(opts)...)
				return []sdkmetric.Reader{push}
			}
			core, logs := observer.New(zapcore.WarnLevel)
			p, release, err := AcquireMeterProvider(context.Background(), zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			p.Instruments.Record(&sink.Result{Ctx: context.Background(), M: measuretest.Streamed(), Provider: "aggregation-test"})

			// The push reader: every histogram has the one aggregation.
			var rm metricdata.ResourceMetrics
			if err := push.Collect(context.Background(), &rm); err != nil {
				t.Fatal(err)
			}
			histograms := 0
			for _, sm := range rm.ScopeMetrics {
				if sm.Scope.SchemaURL != SchemaURL {
					t.Errorf("scope %s has schema %q, want %q", sm.Scope.Name, sm.Scope.SchemaURL, SchemaURL)
				}
				for _, m := range sm.Metrics {
					switch m.Data.(type) {
					case metricdata.ExponentialHistogram[float64], metricdata.ExponentialHistogram[int64]:
						histograms++
						if !tt.exponential {
							t.Errorf("%s is exponential", m.Name)
						}
					case metricdata.Histogram[float64], metricdata.Histogram[int64]:
						histograms++
						if tt.exponential {
							t.Errorf("%s has explicit buckets", m.Name)
						}
					}
				}
			}
			if histograms < 6 {
				t.Errorf("%d histograms pushed, want the 6 a streamed exchange records", histograms)
			}

			// Caddy's /metrics: native histograms, or classic buckets.
			reg := prometheus.NewPedanticRegistry()
			defer p.Register(reg, zap.NewNop())()
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatalf("gather: %v", err)
			}
			rate := findFamily(mfs, "tokentap_output_token_rate_per_second")
			if rate == nil || len(rate.GetMetric()) == 0 {
				t.Fatal("no tokentap_output_token_rate_per_second on /metrics")
			}
			h := rate.GetMetric()[0].GetHistogram()
			native := h.Schema != nil && len(h.GetPositiveSpan()) > 0
			if native != tt.exponential || (len(h.GetBucket()) > 0) == tt.exponential {
				t.Errorf("native %v (schema %v, %d spans), %d classic buckets; want native %v", native, h.Schema, len(h.GetPositiveSpan()), len(h.GetBucket()), tt.exponential)
			}
			if tt.exponential && h.GetSchema() != 8 {
				// One value: the finest scale Prometheus keeps.
				t.Errorf("schema %d, want 8", h.GetSchema())
			}
			if warned := logs.FilterMessage("unknown histogram aggregation; using explicit buckets").Len() == 1; warned != tt.warns {
				t.Errorf("warned %v, want %v: %v", warned, tt.warns, logs.All())
			}
		})
	}
}

func findFamily(mfs []*dto.MetricFamily, name string) *dto.MetricFamily {
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return nil
}
