package stats

import (
	"fmt"
	"sort"
	"strings"
)

// Metric is one per-request quantity the stats keep a distribution of.
type Metric uint8

// The metrics, in the order of the JSON contract.
const (
	TimeToFirstToken Metric = iota
	TimeToFirstVisibleToken
	OutputTokensPerSecond
	TimePerOutputToken
	Duration
	InputTokens
	OutputTokens
	// Cost is what a request cost in US dollars, for requests with a
	// price (see package cost); a row's total is Counts.CostUSD.
	Cost

	// NumMetrics is the number of metrics, for arrays indexed by Metric.
	NumMetrics = int(iota)
)

// metricInfo describes a metric as users see it.
type metricInfo struct {
	// name is the key in the JSON of /tokentap/stats and of the sketches.
	name string
	// short is the name in the CLI's columns and sort keys.
	short string
	// unit is the UCUM unit, as OpenTelemetry writes it.
	unit string
	// slowTailLow is set when the low values are the bad tail (throughput):
	// the report adds p5, and a full sketch collapses its highest bins
	// instead of its lowest.
	slowTailLow bool
}

var metrics = [NumMetrics]metricInfo{
	TimeToFirstToken:        {"time_to_first_token", "ttft", "s", false},
	TimeToFirstVisibleToken: {"time_to_first_visible_token", "ttfvt", "s", false},
	OutputTokensPerSecond:   {"output_tokens_per_second", "tps", "{token}/s", true},
	TimePerOutputToken:      {"time_per_output_token", "tpot", "s", false},
	Duration:                {"duration", "dur", "s", false},
	InputTokens:             {"input_tokens", "in", "{token}", false},
	OutputTokens:            {"output_tokens", "out", "{token}", false},
	Cost:                    {"cost", "cost", "{USD}", false},
}

// String returns the metric's name in the JSON contract.
func (m Metric) String() string {
	if int(m) < NumMetrics {
		return metrics[m].name
	}
	return fmt.Sprintf("metric(%d)", m)
}

// Short returns the metric's short name, used by the CLI's columns and sort
// keys ("ttft", "tps", ...).
func (m Metric) Short() string { return metrics[m].short }

// Unit returns the metric's unit: "s", "{token}/s" or "{token}".
func (m Metric) Unit() string { return metrics[m].unit }

// Quantiles returns the quantiles reported for the metric, ascending: p50,
// p90, p95 and p99, and for output tokens/s also p5, its slow tail.
func (m Metric) Quantiles() []float64 {
	if metrics[m].slowTailLow {
		return quantilesLowTail
	}
	return quantilesDefault
}

var (
	quantilesDefault = []float64{0.5, 0.9, 0.95, 0.99}
	quantilesLowTail = []float64{0.05, 0.5, 0.9, 0.95, 0.99}
)

// LookupMetric finds a metric by its JSON name or its short name.
func LookupMetric(name string) (Metric, bool) {
	for i := range metrics {
		if metrics[i].name == name || metrics[i].short == name {
			return Metric(i), true
		}
	}
	return 0, false
}

// QuantileName returns the key of quantile q in the JSON contract and the
// CLI: 0.05 is "p5", 0.5 is "p50", 0.99 is "p99".
func QuantileName(q float64) string {
	return fmt.Sprintf("p%g", q*100)
}

// MetricNames lists the metrics' short names, sorted, for messages.
func MetricNames() string {
	names := make([]string, NumMetrics)
	for i := range metrics {
		names[i] = metrics[i].short
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
