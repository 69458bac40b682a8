package caddymodule

import (
	"context"
	"time"

	"github.com/tokentap/tokentap/meter"
)

// finished is one exchange's result as every sink besides the span sees it:
// the OpenTelemetry metrics (metrics.go), the live stats (stats.go) and the
// access log (accesslog.go). It is built once, at the end of the exchange.
type finished struct {
	// ctx carries the exchange's span, so metric points can link to their
	// trace as exemplars.
	ctx context.Context
	m   *meter.Measurement
	end time.Time
	// provider is the gen_ai.provider.name the span got.
	provider string
	// host and port are the upstream reverse_proxy chose ("" and 0 when
	// it set none).
	host string
	port int
	// labels are the configured labels, resolved for this request and
	// capped (labels.go); sorted by name.
	labels []labelValue
}

// record hands a finished exchange to each sink. Each runs guarded, so a
// fault in one costs that sink's record of this request and nothing else.
func (x *exchange) record(f *finished) {
	x.safely("metrics", func() { x.h.recordMetrics(f) })
	x.safely("stats", func() { x.h.recordStats(f) })
	x.safely("access log", func() { x.recordLogFields(f) })
}
