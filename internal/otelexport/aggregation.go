package otelexport

import (
	"os"
	"strings"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/zap"
)

// histogramAggregationEnv is the specification's switch for the histogram
// aggregation of OTLP metrics. tokentap applies it to every reader, Caddy's
// /metrics included, so that one variable turns the fleet view exact
// everywhere: exponential histograms on OTLP, native (sparse) histograms
// for a Prometheus that scrapes them.
const histogramAggregationEnv = "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"

// exponentialHistogram is the specification's default exponential
// aggregation: at most 160 buckets, the scale as fine as the values'
// range allows. Prometheus keeps scales up to 8 (buckets 0.27 % wide); a
// series whose values span a factor of 2^20 still gets scale 3 (9 %).
var exponentialHistogram = sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: 160, MaxScale: 20}

// histogramViews returns the views that histogramAggregationEnv asks for:
// none by default (explicit buckets, each instrument's own boundaries), or
// one that makes every histogram base-2 exponential. An unknown value is
// logged and the default kept, as the specification asks.
func histogramViews(logger *zap.Logger) []sdkmetric.View {
	v := strings.ToLower(strings.TrimSpace(os.Getenv(histogramAggregationEnv)))
	switch v {
	case "", "explicit_bucket_histogram":
		return nil
	case "base2_exponential_bucket_histogram":
		return []sdkmetric.View{sdkmetric.NewView(
			sdkmetric.Instrument{Kind: sdkmetric.InstrumentKindHistogram},
			sdkmetric.Stream{Aggregation: exponentialHistogram},
		)}
	}
	logger.Warn("unknown histogram aggregation; using explicit buckets",
		zap.String("variable", histogramAggregationEnv), zap.String("value", v),
		zap.Strings("known", []string{"explicit_bucket_histogram", "base2_exponential_bucket_histogram"}))
	return nil
}
