package caddymodule

import (
	"go.opentelemetry.io/otel/trace"

	"github.com/tokentap/tokentap/internal/sink"
)

// record hands a finished exchange to each sink in turn. Each runs guarded,
// so a fault in one costs that sink's record of this request and nothing
// else; if the span sink is the one that failed, the span still ends, at
// the measured end.
func (x *exchange) record(r *sink.Result) {
	for i := range x.h.sinks {
		s := &x.h.sinks[i]
		if !x.safely(s.name, func() { s.Record(r) }) && s.name == "span" {
			trace.SpanFromContext(r.Ctx).End(trace.WithTimestamp(r.End))
		}
	}
}
