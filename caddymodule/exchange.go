package caddymodule

import (
	"context"
	"mime"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/bodytee"
	"github.com/tokentap/tokentap/internal/capture"
	"github.com/tokentap/tokentap/internal/inflight"
	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/sse"
)

// exchange is the state of one measured request. Everything in it is used
// from the request's goroutine only (the request body tee has its own lock),
// so the hot path takes no lock shared with other requests.
type exchange struct {
	h    *Handler
	r    *http.Request
	info meter.DialectInfo
	// tap measures the exchange as its bytes pass (named so as not to
	// shadow the meter package, which this file uses alongside it).
	tap  meter.Meter
	tee  *bodytee.Tee
	span trace.Span
	// ctx is the request's context with the exchange's span in it.
	ctx context.Context
	// pathRequest is what the request's path alone says (prepare): a
	// field, so that the dialect's Request, called through an interface,
	// does not move it to the heap.
	pathRequest meter.Request
	// startAttrs holds the span's start attributes, for the same reason.
	startAttrs [4]attribute.KeyValue

	// guessed is set when no dialect claimed the path and OpenAI chat was
	// assumed; the response's media type may still say better.
	guessed bool
	// requestRead is set once the request body was parsed in full.
	requestRead bool
	// responded is set at the first final status.
	responded bool
	// broken is set when tokentap's own code panicked: measuring stops for
	// this request, and the traffic goes on untouched.
	broken bool

	// injected is set when inject_usage added stream_options.include_usage
	// to the request; strip then edits the response back (injectusage.go).
	injected bool
	strip    *usageStripper
	// fullBody is the request body when inject_usage read it whole.
	fullBody []byte

	// output collects the generated text when content is captured
	// (capture.go); nil otherwise.
	output *capture.Output

	// result is what the sinks get when the exchange ends; part of the
	// exchange so that finishing allocates no more for it.
	result sink.Result

	inflight *inflight.Counter
	// inflightAhead is how many requests to the same upstream and model
	// were in flight when this one's response began.
	inflightAhead int64
	overhead      time.Duration

	// probe is set when the request carried this process's probe token
	// (probe.go); the header is gone by the time the request goes on.
	probe bool
}

// clientSpanKind is built once: an option made per request is one more
// allocation (an interface around the kind).
var clientSpanKind = trace.WithSpanKind(trace.SpanKindClient)

func (h *Handler) begin(r *http.Request) *exchange {
	start := time.Now()
	x := &exchange{h: h, r: r, probe: takeProbeHeader(r.Header)}
	switch d, ok := meter.DialectForPath(r.URL.Path); {
	case h.dialect != nil:
		x.info = *h.dialect
	case ok:
		x.info = d
	default:
		x.info = meter.DetectDialect(r.URL.Path)
		x.guessed = true
	}
	x.tap.Init(x.info.New(), meter.Options{
		MaxEventSize:   int(h.MaxEventSize),
		MaxBodySize:    int(h.MaxResponseBody),
		StallThreshold: time.Duration(h.StallThreshold),
		OnPanic:        h.onDecompressPanic,
		Estimator:      h.estimator,
	}, start)
	return x
}

// prepare starts the span, tees the request body and propagates the trace
// context upstream. It returns the request to pass on.
func (x *exchange) prepare(r *http.Request) *http.Request {
	h := x.h
	t0 := time.Now()
	defer func() { x.overhead += time.Since(t0) }()

	ctx := r.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() {
		// No tracing handler in front: continue the client's trace if it
		// sent one.
		ctx = h.propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	op := x.tap.Dialect().Operation(r.URL.Path)
	// What is known before the body has passed goes on the span as it
	// starts, where samplers see it: the operation, the provider and,
	// for the APIs that put it in the path (Gemini, Bedrock), the model;
	// and the conversation id, where configured.
	// A model in the body is known only once the upload has gone by, and
	// the upstream only once reverse_proxy has chosen it.
	x.tap.Dialect().Request(&x.pathRequest, r.URL.Path, nil)
	name := op
	x.startAttrs[0] = semconv.GenAIOperationNameKey.String(op)
	x.startAttrs[1] = semconv.GenAIProviderNameKey.String(x.provider(""))
	startAttrs := x.startAttrs[:2]
	if model := x.pathRequest.Model; model != "" {
		name = op + " " + model
		startAttrs = append(startAttrs, semconv.GenAIRequestModel(model))
	}
	if h.ConversationID != "" {
		if id := x.conversationID(r); id != "" {
			startAttrs = append(startAttrs, semconv.GenAIConversationID(id))
		}
	}
	ctx, x.span = h.tracer.Start(ctx, name,
		clientSpanKind,
		trace.WithTimestamp(x.tap.M.Start),
		trace.WithAttributes(startAttrs...))
	// reverse_proxy copies the request headers upstream, so the upstream
	// sees this span as its parent.
	h.propagator.Inject(ctx, propagation.HeaderCarrier(r.Header))
	x.ctx = ctx
	x.prepareCapture(r)

	if h.InjectUsage && x.info.Name == "openai_chat" && x.tap.M.Operation != "embeddings" {
		r, x.injected = x.injectUsage(r)
	}
	if x.fullBody == nil && r.Body != nil && r.Body != http.NoBody && h.MaxRequestBody > 0 {
		x.tee = bodytee.New(r.Body, h.MaxRequestBody, r.ContentLength)
		r.Body = x.tee
	}
	return r.WithContext(ctx)
}

// provider is the gen_ai.provider.name: configured, else the upstream host's
// provider, else the dialect's.
func (x *exchange) provider(upstreamHost string) string {
	if x.h.Provider != "" {
		return x.h.Provider
	}
	if p := meter.ProviderForHost(upstreamHost); p != "" {
		return p
	}
	return x.info.Provider
}

// safely runs tokentap's own measuring code so that a bug in it costs this
// request its measurement and nothing else. It reports whether f returned.
func (x *exchange) safely(what string, f func()) (ok bool) {
	defer func() {
		if rec := recover(); rec != nil {
			x.broken = true
			x.tap.Abandon()
			x.tap.Observer().Degrade("internal_panic")
			x.h.recordPanic(what, rec)
		}
	}()
	f()
	return true
}

// internalPanics counts panics recovered in tokentap's measuring code across
// all handlers, for the tests.
var internalPanics atomic.Int64

// recordPanic counts a recovered panic and logs the handler's first one with
// its stack. It may run on a meter's decompression goroutine.
func (h *Handler) recordPanic(what string, rec any) {
	internalPanics.Add(1)
	if h.faults.Add(1) == 1 {
		h.logger.Error("recovered a panic in tokentap's measuring code; the request continues unmeasured",
			zap.String("during", what),
			zap.Any("panic", rec),
			zap.ByteString("stack", debug.Stack()))
	}
}

// readRequest parses the request parameters from what the tee has copied.
func (x *exchange) readRequest() {
	if x.requestRead {
		return
	}
	var body []byte
	var truncated, complete bool
	switch {
	case x.fullBody != nil:
		body, complete = x.fullBody, true
	case x.tee != nil:
		body, truncated, complete = x.tee.Snapshot()
	default:
		complete = true
	}
	x.tap.Request(x.r.URL.Path, body, truncated)
	if x.injected {
		// The request upstream asks for usage: the stream will carry it,
		// so its text needs no tokenizer.
		x.tap.M.Request.IncludeUsage = true
	}
	x.requestRead = complete || truncated
}

// response is called once, at the first final status from upstream.
func (x *exchange) response(status int, header http.Header) {
	if x.broken {
		return
	}
	t0 := time.Now()
	x.safely("response", func() {
		ct, ce := header.Get("Content-Type"), header.Get("Content-Encoding")
		if x.guessed {
			mediaType, _, _ := mime.ParseMediaType(ct)
			if d, ok := meter.DialectForMediaType(mediaType); ok {
				// Nothing has been read yet: start over in the right dialect.
				x.info, x.guessed = d, false
				x.tap.Init(d.New(), x.tap.Options(), x.tap.M.Start)
				x.requestRead = false
			}
		}
		x.readRequest()
		// Before Response, which may start a decompressing goroutine.
		x.captureResponse()
		// Bedrock reports a whole body's counts in its headers.
		x.tap.ResponseHeader(header)
		x.tap.Response(status, ct, ce)
		if x.injected && status == http.StatusOK && ce == "" && strings.HasPrefix(strings.ToLower(ct), "text/event-stream") {
			max := int(x.h.MaxEventSize)
			if max <= 0 {
				max = sse.DefaultMaxEventSize
			}
			x.strip = &usageStripper{max: max}
		}
		host, port := x.upstream()
		x.inflight = inflight.For(host, port, x.tap.M.Request.Model)
		x.inflightAhead = x.inflight.Begin()
		if model := x.tap.M.Request.Model; model != "" {
			x.span.SetName(x.tap.M.Operation + " " + model)
		}
	})
	x.overhead += time.Since(t0)
}

// feed measures response bytes after they were forwarded to the client.
func (x *exchange) feed(p []byte, at time.Time) {
	if x.broken {
		return
	}
	t0 := time.Now()
	x.safely("write", func() { x.tap.Write(p, at) })
	x.overhead += time.Since(t0)
}

// feedWrites feeds the meter held writes, each ending at its end in held
// and given its own time, under one recover frame and one overhead clock.
func (x *exchange) feedWrites(held []byte, writes []heldWrite) {
	if x.broken {
		return
	}
	t0 := time.Now()
	x.safely("write", func() {
		start := 0
		for _, hw := range writes {
			x.tap.Write(held[start:hw.end], hw.at)
			start = hw.end
		}
	})
	x.overhead += time.Since(t0)
}

// upstream returns the host and port reverse_proxy chose, when it set them.
func (x *exchange) upstream() (host string, port int) {
	repl, ok := x.r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return "", 0
	}
	host, _ = repl.GetString("http.reverse_proxy.upstream.host")
	if p, ok := repl.GetString("http.reverse_proxy.upstream.port"); ok {
		port, _ = strconv.Atoi(p)
	}
	return host, port
}

// finish completes the measurement and ends the span. abort says whether the
// transport broke (see meter.Meter.Finish).
func (x *exchange) finish(abort meter.Outcome, errorType string) {
	end := time.Now()
	if x.inflight != nil {
		x.inflight.End()
	}
	var m *meter.Measurement
	x.safely("finish", func() {
		x.readRequest()
		m = x.tap.Finish(end, abort, errorType)
		if x.injected && m.Usage.Source == meter.UsageReported {
			m.Usage.Source = meter.UsageInjected
		}
	})
	if m == nil {
		// The meter itself failed; end the span with what is certain.
		m = &x.tap.M
		if m.Outcome == meter.OutcomeUnknown {
			m.Outcome = abort
		}
	}
	r := &x.result
	*r = sink.Result{Ctx: x.ctx, M: m, End: end}
	if r.Ctx == nil {
		// The span was never started: sinks see no span rather than
		// another handler's.
		r.Ctx = trace.ContextWithSpan(x.r.Context(), x.span)
	}
	x.safely("labels", func() {
		r.Host, r.Port = x.upstream()
		r.Provider = x.provider(r.Host)
		r.Labels = x.resolveLabels()
		r.Route = originalPath(x.r)
	})
	if m.Degraded > 0 {
		x.logDegraded(m)
	}
	x.safely("cost", func() { x.price(r) })
	x.safely("slo", func() { x.judge(r) })
	r.Drift = x.h.drift
	x.safely("content", func() { r.Content = x.content(m) })
	x.overhead += time.Since(end)
	r.Inflight, r.InflightKnown, r.Overhead = x.inflightAhead, x.inflight != nil, x.overhead
	r.Probe = x.probe
	x.record(r)
}

// originalPath is the path the client asked for: handle_path strips its
// prefix from r's, and Caddy keeps the request as it arrived.
func originalPath(r *http.Request) string {
	if orig, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && orig.URL != nil {
		return orig.URL.Path
	}
	return r.URL.Path
}

// conversationID evaluates the conversation_id template for r.
func (x *exchange) conversationID(r *http.Request) string {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return ""
	}
	return repl.ReplaceAll(x.h.ConversationID, "")
}

// logDegraded says once per dialect and reason that the measurement of an
// exchange lost something: the span and the tokentap.degraded counter say
// which exchanges and how often, the log that it started, so that a
// provider's new format is noticed without a log line per request.
func (x *exchange) logDegraded(m *meter.Measurement) {
	if x.h.logOnce.first("degraded", m.Dialect+" "+m.DegradedReason) {
		x.h.logger.Warn("tokentap could not read part of a response; the traffic passed untouched, the measurement is degraded (tokentap.degraded.reason on its span)",
			zap.String("dialect", m.Dialect), zap.String("reason", m.DegradedReason),
			zap.String("model", m.Request.Model))
	}
}

// maxLoggedOnce bounds the keys onceLog remembers, so that a stream of
// made-up model names cannot grow the set without end; past it nothing
// more is logged.
const maxLoggedOnce = 1000

// onceLog remembers what was logged already, for the warnings that would
// otherwise repeat on every request (a model without a price, a degraded
// measurement).
type onceLog struct {
	mu   sync.Mutex
	seen map[[2]string]struct{}
}

// first reports whether the warning of kind about key is new, remembering
// it.
func (l *onceLog) first(kind, key string) bool {
	k := [2]string{kind, key}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, seen := l.seen[k]; seen || len(l.seen) >= maxLoggedOnce {
		return false
	}
	if l.seen == nil {
		l.seen = map[[2]string]struct{}{}
	}
	l.seen[k] = struct{}{}
	return true
}
