package otelexport

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"

	"github.com/tokentap/tokentap/internal/meter/usagecheck"
	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/slo"
)

// Bucket boundaries. The semconv ones are the GenAI conventions' explicit
// boundaries (v1.41.0 gen-ai-metrics.md); the SDK's defaults would put most
// LLM latencies in two or three buckets.
var (
	// durationBuckets: 10 ms doubling to 81.92 s, for every semconv
	// duration histogram.
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	// tokenBuckets: powers of 4 from 1 to 4^13, for gen_ai.client.token.usage.
	tokenBuckets = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
	// timeToFirstTokenBuckets: finer than durationBuckets where models
	// differ, so that histogram_quantile can tell them apart: each bound
	// at most 1.5 times the one below from 50 ms to 3 s, at most twice
	// it above, up to two minutes for reasoning models and queues.
	timeToFirstTokenBuckets = []float64{0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120}
	// tokensPerSecondBuckets: from CPU-bound local models (a few tokens/s)
	// to dedicated inference hardware (thousands), each bound at most 1.5
	// times the one below from 10 to 3000 tokens/s, so the slow tail (p5)
	// is as well resolved as the median.
	tokensPerSecondBuckets = []float64{1, 2, 5, 10, 15, 20, 25, 30, 40, 50, 60, 75, 100, 125, 150, 200, 250, 300, 400, 500, 750, 1000, 1500, 2000, 3000, 5000}
)

// Names of the tokentap.* histograms (the conventions have no time to first
// token or decode rate for clients); dashboards depend on them. The rate is
// named for what it measures and its unit says per second, so that
// Prometheus, which appends the unit, says it once:
// tokentap_output_token_rate_per_second (it was
// tokentap.output_tokens_per_second, tokentap_output_tokens_per_second_per_second
// in Prometheus, before 2026-12; docs/telemetry.md).
const (
	metricTimeToFirstToken      = "tokentap.time_to_first_token"
	metricOutputTokensPerSecond = "tokentap.output_token_rate"
	// The cost counters (Prometheus: tokentap_cost_total,
	// tokentap_cost_unpriced_total).
	metricCost     = "tokentap.cost"
	metricUnpriced = "tokentap.cost.unpriced"
	// The SLO counters (Prometheus: tokentap_slo_requests_total,
	// tokentap_slo_goodput_tokens_total): attainment is the met share of
	// the first, token goodput the rate of the second.
	metricSLORequests = "tokentap.slo.requests"
	metricSLOGoodput  = "tokentap.slo.goodput_tokens"
	// The exchanges whose measurement a fault cost something (Prometheus:
	// tokentap_degraded_total), by tokentap.degraded.reason: the span says
	// which exchange, the counter how often, without sampling.
	metricDegraded = "tokentap.degraded"
	// The streams that arrived held back and released in one burst
	// (Prometheus: tokentap_stream_buffered_total): the span's
	// tokentap.stream.buffered says which.
	metricBuffered = "tokentap.stream.buffered"
	// verify_usage's checks (Prometheus: tokentap_usage_checks_total),
	// by tokentap.usage.check: match, mismatch or unverifiable.
	metricUsageChecks = "tokentap.usage.checks"
)

// usageCheckOutcomes are the tokentap.usage.check options, made once so
// that counting a check allocates nothing for them.
var usageCheckOutcomes = [...]metric.AddOption{
	metric.WithAttributes(attrUsageCheck.String("match")),
	metric.WithAttributes(attrUsageCheck.String("mismatch")),
	metric.WithAttributes(attrUsageCheck.String("unverifiable")),
}

// The gen_ai.token.type attributes of the two token usage points.
var (
	tokenTypeInput  = semconv.GenAITokenTypeKey.String(string(genaiconv.TokenTypeInput))
	tokenTypeOutput = semconv.GenAITokenTypeKey.String(string(genaiconv.TokenTypeOutput))
)

// Instruments are the histograms of one MeterProvider. They are the
// metrics sink: Record records a finished exchange's points.
type Instruments struct {
	// enabled is false for the no-op provider (OTEL_SDK_DISABLED), so that
	// no attribute set is built for nothing.
	enabled bool

	duration         metric.Float64Histogram
	tokenUsage       metric.Int64Histogram
	timeToFirstChunk metric.Float64Histogram
	timePerChunk     metric.Float64Histogram
	// gaps, when set, aggregates time_per_output_chunk in place of
	// timePerChunk (chunkgaps.go).
	gaps                  *gapHistogram
	timeToFirstToken      metric.Float64Histogram
	outputTokensPerSecond metric.Float64Histogram
	cost                  metric.Float64Counter
	unpriced              metric.Int64Counter
	sloRequests           metric.Int64Counter
	sloGoodput            metric.Int64Counter
	degraded              metric.Int64Counter
	buffered              metric.Int64Counter
	usageChecks           metric.Int64Counter
	healthTransitions     metric.Int64Counter
}

// newMetricInstruments creates the instruments. The genaiconv constructors
// give the conventions' names, units and descriptions; the bucket
// boundaries are passed here because the constructors set none.
//
// With gaps, tokentap aggregates time_per_output_chunk itself and the
// SDK instrument is not created: the readers get it from gaps' producers.
func newMetricInstruments(mp metric.MeterProvider, enabled bool, gaps *gapHistogram) (*Instruments, error) {
	m := mp.Meter(InstrumentationName, metric.WithInstrumentationVersion(Version()), metric.WithSchemaURL(SchemaURL))
	durations := metric.WithExplicitBucketBoundaries(durationBuckets...)
	ins := &Instruments{
		enabled: enabled,
		gaps:    gaps,
	}
	var errs []error
	collect := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	d, err := genaiconv.NewClientOperationDuration(m, durations)
	collect(err)
	ins.duration = d.Inst()
	u, err := genaiconv.NewClientTokenUsage(m, metric.WithExplicitBucketBoundaries(tokenBuckets...))
	collect(err)
	ins.tokenUsage = u.Inst()
	ttfc, err := genaiconv.NewClientOperationTimeToFirstChunk(m, durations)
	collect(err)
	ins.timeToFirstChunk = ttfc.Inst()
	if gaps == nil {
		tpoc, err := genaiconv.NewClientOperationTimePerOutputChunk(m, durations)
		collect(err)
		ins.timePerChunk = tpoc.Inst()
	}
	ins.timeToFirstToken, err = m.Float64Histogram(metricTimeToFirstToken,
		metric.WithUnit("s"),
		metric.WithDescription("Time from the request reaching the proxy to the first response event carrying generated output (text, reasoning or tool-call arguments); streamed responses only."),
		metric.WithExplicitBucketBoundaries(timeToFirstTokenBuckets...))
	collect(err)
	ins.outputTokensPerSecond, err = m.Float64Histogram(metricOutputTokensPerSecond,
		metric.WithUnit("{token}/s"),
		metric.WithDescription("Decode rate of a streamed response: the output tokens that arrived after the first output event (less reasoning counted but never streamed) over the time from the first output event to the last."),
		metric.WithExplicitBucketBoundaries(tokensPerSecondBuckets...))
	collect(err)
	ins.cost, err = m.Float64Counter(metricCost,
		metric.WithUnit("{USD}"),
		metric.WithDescription("What the exchanges cost, in US dollars, at the configured prices per million tokens: reported (or injected) counts only, unless cost_from_estimates."))
	collect(err)
	ins.unpriced, err = m.Int64Counter(metricUnpriced,
		metric.WithUnit("{request}"),
		metric.WithDescription("Exchanges with token counts but no price for their model, while prices are configured: their cost is missing from tokentap.cost."))
	collect(err)
	ins.sloRequests, err = m.Int64Counter(metricSLORequests,
		metric.WithUnit("{request}"),
		metric.WithDescription("Exchanges judged against the objective (slo) configured for their model, by tokentap.slo.met; client aborts are not judged."))
	collect(err)
	ins.sloGoodput, err = m.Int64Counter(metricSLOGoodput,
		metric.WithUnit("{token}"),
		metric.WithDescription("Output tokens of the exchanges that met their objective (slo): its rate is the token goodput."))
	collect(err)
	ins.degraded, err = m.Int64Counter(metricDegraded,
		metric.WithUnit("{request}"),
		metric.WithDescription("Exchanges whose measurement a fault cost something (an unreadable event or body, a body over its cap, a model family or usage entry not known), by tokentap.degraded.reason; the traffic itself was passed on untouched."))
	collect(err)
	ins.buffered, err = m.Int64Counter(metricBuffered,
		metric.WithUnit("{request}"),
		metric.WithDescription("Streamed responses that arrived held back and released in one burst at their end (tokentap.stream.buffered): their time to first token is the whole generation and their decode rate not the model's."))
	collect(err)
	ins.usageChecks, err = m.Int64Counter(metricUsageChecks,
		metric.WithUnit("{request}"),
		metric.WithDescription("Exchanges sampled by verify_usage, by tokentap.usage.check: match and mismatch compare the reported output count with the tokenizer's count of the text; unverifiable ones could not be compared (no known tokenizer, tool calls, shown reasoning)."))
	collect(err)
	collect(newHealthInstruments(m, ins))
	collect(newActiveInstruments(m))
	collect(newHistoryInstruments(m))
	collect(newRateLimitInstruments(m))
	if len(errs) > 0 {
		return nil, fmt.Errorf("creating the metric instruments: %v", errs)
	}
	return ins, nil
}

// metricBufs pools the attribute slice each record builds, so that a
// request whose attributes were seen before allocates nothing.
var metricBufs = sync.Pool{New: func() any {
	b := make([]attribute.KeyValue, 0, 16)
	return &b
}}

// Enabled reports whether the instruments record anything: false for the
// no-op provider (OTEL_SDK_DISABLED), whose sink can be left out.
func (ins *Instruments) Enabled() bool { return ins != nil && ins.enabled }

// Record records a finished exchange's metric points, every one with r.Ctx
// so that exemplars link to the exchange's span (the SDK keeps exemplars
// of sampled spans).
func (ins *Instruments) Record(r *sink.Result) {
	if !ins.Enabled() {
		return
	}
	m := r.M
	bp := metricBufs.Get().(*[]attribute.KeyValue)
	kvs := appendMetricAttributes((*bp)[:0], r)
	opts := metricAttrs.lookup(kvs)
	// Drop the references to this request's strings before pooling.
	clear(kvs)
	*bp = kvs[:0]
	metricBufs.Put(bp)

	ctx := r.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	all := opts.all[:]
	ins.duration.Record(ctx, m.Duration().Seconds(), all...)
	if m.Streamed {
		// The conventions: streaming calls only.
		if m.FirstChunk > 0 {
			ins.timeToFirstChunk.Record(ctx, m.FirstChunk.Seconds(), all...)
		}
		if ins.gaps != nil {
			ins.gaps.record(ctx, opts.set, &m.ChunkGaps, m.MaxChunkGap)
		} else {
			recordChunkGaps(ctx, ins.timePerChunk, &m.ChunkGaps, m.MaxChunkGap, all)
		}
	}
	if m.FirstToken > 0 {
		ins.timeToFirstToken.Record(ctx, m.FirstToken.Seconds(), all...)
	}
	if rate, ok := m.OutputTokensPerSecond(); ok {
		ins.outputTokensPerSecond.Record(ctx, rate, all...)
	}

	// gen_ai.client.token.usage only for counts the provider reported:
	// the conventions forbid reporting usage that could not be obtained
	// unless the user enabled offline counting, and an estimate is
	// tokentap's guess. Input tokens are never estimated, so they are
	// recorded whenever known; output tokens only when reported (or
	// reported on request, "injected").
	if n, ok := r.Tokens(sink.InputTokens); ok {
		ins.tokenUsage.Record(ctx, n, opts.input[:]...)
	}
	if n, ok := r.Tokens(sink.OutputTokens); ok && r.OutputTokensReported() {
		ins.tokenUsage.Record(ctx, n, opts.output[:]...)
	}
	if r.HasCost {
		ins.cost.Add(ctx, r.Cost, opts.add[:]...)
	}
	if r.Unpriced {
		ins.unpriced.Add(ctx, 1, opts.add[:]...)
	}
	if m.Degraded > 0 {
		// Rare, so the reason's attribute is added here rather than
		// cached with the exchange's set.
		ins.degraded.Add(ctx, 1, opts.add[0], metric.WithAttributes(attrDegradedReason.String(m.DegradedReason)))
	}
	if m.Buffered {
		ins.buffered.Add(ctx, 1, opts.add[:]...)
	}
	switch c := &r.UsageCheck; {
	case c.Status == usagecheck.Verified && !c.Mismatch:
		ins.usageChecks.Add(ctx, 1, opts.add[0], usageCheckOutcomes[0])
	case c.Status == usagecheck.Verified:
		ins.usageChecks.Add(ctx, 1, opts.add[0], usageCheckOutcomes[1])
	case c.Status == usagecheck.Unverifiable:
		ins.usageChecks.Add(ctx, 1, opts.add[0], usageCheckOutcomes[2])
	}
	recordRateLimit(r)
	switch r.SLO {
	case slo.Met:
		ins.sloRequests.Add(ctx, 1, opts.sloMet[:]...)
		if n, ok := r.Tokens(sink.OutputTokens); ok {
			ins.sloGoodput.Add(ctx, n, opts.add[:]...)
		}
	case slo.Missed:
		ins.sloRequests.Add(ctx, 1, opts.sloMissed[:]...)
	}
}

// appendMetricAttributes appends the attributes every point of an exchange
// carries. Values that come from traffic are capped and made valid UTF-8:
// Prometheus rejects a scrape, and OTLP a whole export, over one invalid
// string.
func appendMetricAttributes(kvs []attribute.KeyValue, r *sink.Result) []attribute.KeyValue {
	m := r.M
	kvs = append(kvs,
		semconv.GenAIOperationNameKey.String(m.Operation),
		semconv.GenAIProviderNameKey.String(validUTF8(r.Provider)),
		attrUsageSource.String(m.Usage.Source.String()),
	)
	if v := m.Request.Model; v != "" {
		kvs = append(kvs, semconv.GenAIRequestModelKey.String(requestModels.Admit(validUTF8(v))))
	}
	if v := m.ResponseModel; v != "" {
		kvs = append(kvs, semconv.GenAIResponseModelKey.String(responseModels.Admit(validUTF8(v))))
	}
	if r.Host != "" {
		host := serverAddrs.Admit(validUTF8(r.Host))
		if host == OverflowLabelValue || r.Port <= 0 {
			kvs = append(kvs, semconv.ServerAddressKey.String(host))
		} else if serverPorts.admit(r.Port) {
			kvs = append(kvs, semconv.ServerAddressKey.String(host), semconv.ServerPortKey.Int(r.Port))
		} else {
			kvs = append(kvs, semconv.ServerAddressKey.String(OverflowLabelValue))
		}
	}
	if v := m.ErrorType; v != "" {
		if v = errorTypes.Admit(validUTF8(v)); v == OverflowLabelValue {
			v = string(genaiconv.ErrorTypeOther)
		}
		kvs = append(kvs, semconv.ErrorTypeKey.String(v))
	}
	for _, l := range r.Labels {
		kvs = append(kvs, labelKey(l.Name).String(validUTF8(l.Value)))
	}
	if r.Probe {
		// Present on probes only, so that client traffic keeps its
		// series and a query can leave the probes out.
		kvs = append(kvs, attrProbe.Bool(true))
	}
	return kvs
}
