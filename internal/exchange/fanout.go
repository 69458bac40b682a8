package exchange

import (
	"go.opentelemetry.io/otel/trace"

	"github.com/tokentap/tokentap/internal/sink"
)

// fanOut records a finished exchange in its live stats row, puts the row's
// health on the Result, then hands the Result to each sink in turn, which
// read it and do not change it. Each runs guarded, so a fault in one costs
// that sink's record of this request and nothing else; if the span sink is
// the one that failed, the span still ends, at the measured end.
func (x *exchange) fanOut(r *sink.Result) {
	if rows := x.mw.cfg.Rows; rows != nil {
		x.safely("stats", func() { r.RowSlow = rows.Record(r) })
	}
	for i := range x.mw.cfg.Sinks {
		s := &x.mw.cfg.Sinks[i]
		if !x.safely(s.Name, func() { s.Record(r) }) && s.Name == "span" {
			trace.SpanFromContext(r.Ctx).End(trace.WithTimestamp(r.End))
		}
	}
}
