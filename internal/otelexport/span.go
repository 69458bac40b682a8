package otelexport

import (
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/tokentap/tokentap/internal/capture"
	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/slo"
)

// Spans is the span sink: it gives the exchange's span, the one in the
// result's context, its attributes and status, and ends it at the
// measured end.
type Spans struct {
	// Langfuse adds attrLangfuseCompletionStart, the first output token's
	// moment, which Langfuse reads as a generation's completion start
	// (it reads no GenAI convention for it).
	Langfuse bool
}

// spanAttrs pools the attribute slice each span's end builds.
var spanAttrs = sync.Pool{New: func() any {
	b := make([]attribute.KeyValue, 0, 48)
	return &b
}}

// sloSource is tokentap.slo.source by whether the request stated its own
// objective, built once.
var sloSource = [2]attribute.KeyValue{attrSLOSource.String("config"), attrSLOSource.String("request")}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Record finishes the span of r.
func (s Spans) Record(r *sink.Result) {
	span := trace.SpanFromContext(r.Ctx)
	if !span.IsRecording() {
		span.End()
		return
	}
	m := r.M
	if m.Request.Model != "" {
		span.SetName(m.Operation + " " + validUTF8(m.Request.Model))
	}
	bp := spanAttrs.Get().(*[]attribute.KeyValue)
	attrs := append((*bp)[:0], semconv.GenAIProviderNameKey.String(r.Provider))
	attrs = appendMeasurement(attrs, r)
	for _, l := range r.Labels {
		attrs = append(attrs, labelKey(l.Name).String(validUTF8(l.Value)))
	}
	if r.Host != "" {
		attrs = append(attrs, semconv.ServerAddress(r.Host))
		if r.Port > 0 {
			attrs = append(attrs, semconv.ServerPort(r.Port))
		}
	}
	attrs = appendContent(attrs, &r.Content)
	attrs = appendUsageCheck(attrs, &r.UsageCheck)
	if r.HasCost {
		attrs = append(attrs, attrCostUSD.Float64(r.Cost))
	}
	if r.SLO != slo.NotJudged {
		attrs = append(attrs, attrSLOMet.Bool(r.SLO == slo.Met), sloSource[boolIndex(r.SLOFromRequest)])
	}
	if r.Probe {
		attrs = append(attrs, attrProbe.Bool(true))
	}
	attrs = appendRateLimit(attrs, &r.RateLimit)
	if s.Langfuse && m.FirstToken > 0 {
		// Langfuse parses the value as JSON: a quoted timestamp.
		attrs = append(attrs, attrLangfuseCompletionStart.String(
			`"`+m.Start.Add(m.FirstToken).UTC().Format(time.RFC3339Nano)+`"`))
	}
	attrs = append(attrs,
		attrInflight.Int64(r.Inflight),
		attrOverhead.Float64(r.Overhead.Seconds()),
	)
	span.SetAttributes(attrs...)
	// The span copied them: drop this request's strings, keep the room.
	clear(attrs)
	*bp = attrs[:0]
	spanAttrs.Put(bp)
	if isFailure(m) {
		span.SetStatus(spanErrorStatus(m))
	}
	if r.RowSlow {
		// Marks the request measured during its row's slowdown, so a
		// trace search finds the incident's requests.
		span.AddEvent(eventRowSlow, trace.WithTimestamp(r.End))
	}
	span.End(trace.WithTimestamp(r.End))
}

// appendContent appends the captured content as the conventions'
// attributes, and tokentap.content.truncated when any part was cut.
func appendContent(attrs []attribute.KeyValue, c *sink.Content) []attribute.KeyValue {
	truncated := false
	for _, p := range []struct {
		key attribute.Key
		r   *capture.Result
	}{
		{semconv.GenAISystemInstructionsKey, &c.System},
		{semconv.GenAIInputMessagesKey, &c.Input},
		{semconv.GenAIOutputMessagesKey, &c.Output},
	} {
		if p.r.JSON != "" {
			attrs = append(attrs, p.key.String(p.r.JSON))
			truncated = truncated || p.r.Truncated
		}
	}
	if truncated {
		attrs = append(attrs, attrContentTruncated.Bool(true))
	}
	return attrs
}

// LabelAttrPrefix prefixes a label's name on spans and metric points.
const LabelAttrPrefix = "tokentap.label."

// labelKeys holds each label name's attribute key, so that a request does
// not join strings for it. Names come from the configuration, so the map
// is small and rarely copied; reads take no lock and allocate nothing.
var labelKeys struct {
	mu   sync.Mutex
	keys atomic.Pointer[map[string]attribute.Key]
}

func labelKey(name string) attribute.Key {
	if m := labelKeys.keys.Load(); m != nil {
		if k, ok := (*m)[name]; ok {
			return k
		}
	}
	labelKeys.mu.Lock()
	defer labelKeys.mu.Unlock()
	old := labelKeys.keys.Load()
	if old != nil {
		if k, ok := (*old)[name]; ok {
			return k
		}
	}
	next := make(map[string]attribute.Key, 1+lenOfKeys(old))
	if old != nil {
		for n, k := range *old {
			next[n] = k
		}
	}
	k := attribute.Key(LabelAttrPrefix + name)
	next[name] = k
	labelKeys.keys.Store(&next)
	return k
}

func lenOfKeys(m *map[string]attribute.Key) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
