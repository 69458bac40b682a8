package exchange

import (
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/sink"
)

// finish completes the measurement, enriches the Result (where it went,
// labels, cost, verdict, content) and hands it to the rows and the sinks
// (fanout.go). abort says whether the transport broke (see
// meter.Meter.Finish).
func (x *exchange) finish(abort meter.Outcome, errorType string) {
	end := time.Now()
	if x.inflight != nil {
		x.inflight.End()
	}
	x.stream.Leave()
	m := x.measure(end, abort, errorType)
	r := &x.result
	*r = sink.Result{Ctx: x.ctx, M: m, End: end}
	if r.Ctx == nil {
		// The span was never started: sinks see no span rather than
		// another exchange's.
		r.Ctx = trace.ContextWithSpan(x.r.Context(), x.span)
	}
	x.safely("labels", func() {
		r.Host, r.Port = x.upstream()
		r.Provider = x.provider(r.Host)
		r.Labels = x.resolveLabels()
		r.Route = x.originalPath()
	})
	if m.Degraded > 0 {
		x.logDegraded(m)
	}
	x.safely("cost", func() { x.price(r) })
	x.safely("slo", func() { x.judge(r) })
	x.safely("content", func() { r.Content = x.content(m) })
	if x.check != nil {
		x.safely("verify_usage", func() { r.UsageCheck = x.check.Result(m, r.Model()) })
	}
	x.overhead += time.Since(end)
	r.Inflight, r.InflightKnown, r.Overhead = x.inflightAhead, x.inflight != nil, x.overhead
	r.Probe = x.probe
	r.RateLimit = x.rateLimit
	x.fanOut(r)
}

// measure ends the meter's measurement; if the meter itself fails, it
// gives what is certain.
func (x *exchange) measure(end time.Time, abort meter.Outcome, errorType string) *meter.Measurement {
	var m *meter.Measurement
	x.safely("finish", func() {
		x.readRequest()
		if x.badSLOHeader {
			x.m.Observer().Degrade("slo_header_invalid")
		}
		m = x.m.Finish(end, abort, errorType)
		if x.injected && m.Usage.Source == meter.UsageReported {
			m.Usage.Source = meter.UsageInjected
		}
	})
	if m == nil {
		m = &x.m.M
		if m.Outcome == meter.OutcomeUnknown {
			m.Outcome = abort
		}
	}
	return m
}

// resolveLabels evaluates the labels' templates for one request, at its
// end, so that what the response set can be used too.
func (x *exchange) resolveLabels() []sink.Label {
	defs := x.mw.cfg.Labels
	if len(defs) == 0 {
		return nil
	}
	replace := x.mw.cfg.Host.Replace
	out := make([]sink.Label, len(defs))
	for i := range defs {
		v := defs[i].Template
		if replace != nil {
			v = replace(x.r, v)
		}
		out[i] = sink.Label{Name: defs[i].Name, Value: defs[i].Values.Admit(v)}
	}
	return out
}

// originalPath is the path the client asked for, before any rewrite.
func (x *exchange) originalPath() string {
	if f := x.mw.cfg.Host.OriginalPath; f != nil {
		return f(x.r)
	}
	return x.r.URL.Path
}

// price sets r's cost when there are prices and r's counts may be billed
// by: reported or injected, or estimated with CostFromEstimates. The cost
// is of the billed counts where the provider reported them apart (Cohere's
// billed_units), else of the usage (cost.Price.CostOf), plus the usage of
// the other models that sampled inside the exchange (Anthropic's advisor)
// at their own prices (cost.Table.Exchange). An exchange with a model, its
// own or another, without a price is marked unpriced and that model logged
// once.
func (x *exchange) price(r *sink.Result) {
	cfg := &x.mw.cfg
	if cfg.Prices.Empty() {
		return
	}
	if !r.OutputTokensReported() && !(cfg.CostFromEstimates && r.M.Usage.Source == meter.UsageEstimated) {
		return
	}
	usd, ok, unpriced := cfg.Prices.Exchange(r.M, r.Model())
	if unpriced != "" {
		r.Unpriced = true
		if x.mw.logOnce.first("unpriced", unpriced) {
			cfg.Logger.Warn("no price for this model: its requests have no cost (add a price line or a pricing_file entry)",
				zap.String("model", unpriced))
		}
		return
	}
	r.Cost, r.HasCost = usd, ok
}

// judge sets r's verdict under the objective the request stated, else
// its model's, if it has one.
func (x *exchange) judge(r *sink.Result) {
	if x.hasRequestSLO {
		r.SLO, r.SLOFromRequest = x.requestSLO.Judge(r.M), true
		return
	}
	if x.mw.cfg.SLOs.Empty() {
		return
	}
	if o, ok := x.mw.cfg.SLOs.Lookup(r.Model()); ok {
		r.SLO = o.Judge(r.M)
	}
}

// logDegraded says once per dialect and reason that the measurement of an
// exchange lost something: the span and the tokentap.degraded counter say
// which exchanges and how often, the log that it started, so that a
// provider's new format is noticed without a log line per request.
func (x *exchange) logDegraded(m *meter.Measurement) {
	if x.mw.logOnce.first("degraded", m.Dialect+" "+m.DegradedReason) {
		x.mw.cfg.Logger.Warn("tokentap could not read part of a response; the traffic passed untouched, the measurement is degraded (tokentap.degraded.reason on its span)",
			zap.String("dialect", m.Dialect), zap.String("reason", m.DegradedReason),
			zap.String("model", m.Request.Model))
	}
}
