package exchange

import (
	"context"
	"mime"
	"net/http"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/capture"
	"github.com/tokentap/tokentap/internal/live"
	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/meter/usagecheck"
	"github.com/tokentap/tokentap/internal/probe"
	"github.com/tokentap/tokentap/internal/ratelimit"
	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/slo"
	"github.com/tokentap/tokentap/sse"
)

// exchange is the state of one measured request. Everything in it is used
// from the request's goroutine only (the request body tee has its own lock),
// so the hot path takes no lock shared with other requests.
type exchange struct {
	mw *Middleware
	r  *http.Request
	// m measures the exchange as its bytes pass.
	m    meter.Meter
	info meter.DialectInfo
	tee  *bodyTee
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
	// broken is set when tokentap's own code panicked, or the exchange
	// was upgraded: measuring stops for this request, and the traffic
	// goes on untouched.
	broken bool

	// injected is set when inject_usage added stream_options.include_usage
	// to the request; strip then edits the response back (inject.go).
	injected bool
	strip    *usageStripper
	// fullBody is the request body when inject_usage read it whole.
	fullBody []byte

	// output collects the generated text when content is captured
	// (capture.go); nil otherwise.
	output *capture.Output
	// check counts the answer text of an exchange sampled by verify_usage
	// (capture.go); nil otherwise, so that an exchange not sampled carries
	// none of it.
	check *usagecheck.Checker

	// result is what the sinks get when the exchange ends; part of the
	// exchange so that finishing allocates no more for it.
	result sink.Result

	inflight *inflightCounter
	// stream is the exchange's entry among the streams in flight
	// (Config.Live), from its response's start to its end.
	stream live.Stream
	// inflightAhead is how many requests to the same upstream and model
	// were in flight when this one's response began.
	inflightAhead int64
	overhead      time.Duration

	// rateLimit is what the response's headers said of the caller's rate
	// limits (response), for the Result.
	rateLimit ratelimit.Headers

	// probe is set when the request carried this process's probe token;
	// the header is gone by the time the request goes on.
	probe bool

	// requestSLO is the objective the request stated in its headers, when
	// hasRequestSLO (Config.SLOHeaders); badSLOHeader is set when a header
	// could not be read, which the measurement counts as degraded.
	requestSLO    slo.Objective
	hasRequestSLO bool
	badSLOHeader  bool
}

// clientSpanKind is built once: an option made per request is one more
// allocation (an interface around the kind).
var clientSpanKind = trace.WithSpanKind(trace.SpanKindClient)

// begin chooses the dialect and starts the meter's clock.
func (mw *Middleware) begin(r *http.Request) *exchange {
	start := time.Now()
	cfg := &mw.cfg
	x := &exchange{mw: mw, r: r, probe: takeProbeHeader(r.Header)}
	switch d, ok := meter.DialectForPath(r.URL.Path); {
	case cfg.Dialect != nil:
		x.info = *cfg.Dialect
	case ok:
		x.info = d
	default:
		x.info = meter.DetectDialect(r.URL.Path)
		x.guessed = true
	}
	x.m.Init(x.info.New(), meter.Options{
		MaxEventSize:   int(cfg.MaxEventSize),
		MaxBodySize:    int(cfg.MaxResponseBody),
		StallThreshold: cfg.StallThreshold,
		OnPanic:        mw.onDecompressPanic,
		Estimator:      cfg.Estimator,
	}, start)
	return x
}

// takeProbeHeader reports whether h carries this process's probe token,
// and removes the probe header, whatever its value: it is tokentap's own,
// the upstream never sees it, and a client cannot set the label without
// the token. A map lookup when the header is absent, which is every
// client request.
func takeProbeHeader(h http.Header) bool {
	v, ok := h[probe.Header]
	if !ok {
		return false
	}
	delete(h, probe.Header)
	return len(v) == 1 && probe.Recognize(v[0])
}

// prepare starts the span, tees the request body and propagates the trace
// context upstream. It returns the request to pass on.
func (x *exchange) prepare(r *http.Request) *http.Request {
	cfg := &x.mw.cfg
	t0 := time.Now()
	defer func() { x.overhead += time.Since(t0) }()

	ctx := r.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() {
		// No tracing handler in front: continue the client's trace if it
		// sent one.
		ctx = cfg.Propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	op := x.m.Dialect().Operation(r.URL.Path)
	// What is known before the body has passed goes on the span as it
	// starts, where samplers see it: the operation, the provider and,
	// for the APIs that put it in the path (Gemini, Bedrock), the model;
	// and the conversation id, where configured.
	// A model in the body is known only once the upload has gone by, and
	// the upstream only once the proxy has chosen it.
	x.m.Dialect().Request(&x.pathRequest, r.URL.Path, nil)
	name := op
	x.startAttrs[0] = semconv.GenAIOperationNameKey.String(op)
	x.startAttrs[1] = semconv.GenAIProviderNameKey.String(x.provider(""))
	startAttrs := x.startAttrs[:2]
	if model := x.pathRequest.Model; model != "" {
		name = op + " " + model
		startAttrs = append(startAttrs, semconv.GenAIRequestModel(model))
	}
	if cfg.ConversationID != "" && cfg.Host.Replace != nil {
		if id := cfg.Host.Replace(r, cfg.ConversationID); id != "" {
			startAttrs = append(startAttrs, semconv.GenAIConversationID(id))
		}
	}
	ctx, x.span = cfg.Tracer.Start(ctx, name,
		clientSpanKind,
		trace.WithTimestamp(x.m.M.Start),
		trace.WithAttributes(startAttrs...))
	// The proxy copies the request headers upstream, so the upstream sees
	// this span as its parent.
	cfg.Propagator.Inject(ctx, propagation.HeaderCarrier(r.Header))
	x.ctx = ctx
	x.prepareCapture(r)
	if cfg.SLOHeaders != SLOHeadersOff {
		x.readSLOHeaders(r.Header)
	}

	if cfg.InjectUsage && x.info.Name == "openai_chat" && x.m.M.Operation != "embeddings" {
		r, x.injected = x.injectUsage(r)
	}
	if x.fullBody == nil && r.Body != nil && r.Body != http.NoBody && cfg.MaxRequestBody > 0 {
		x.tee = newBodyTee(r.Body, cfg.MaxRequestBody, r.ContentLength)
		r.Body = x.tee
	}
	return r.WithContext(ctx)
}

// readSLOHeaders takes the objective the request states for itself, and
// removes the headers unless they are to go on.
func (x *exchange) readSLOHeaders(h http.Header) {
	o, ok, err := slo.FromHeaders(h)
	x.requestSLO, x.hasRequestSLO = o, ok
	if err != nil {
		x.badSLOHeader = true
		if x.mw.logOnce.first("slo_header", "") {
			x.mw.cfg.Logger.Warn("a request stated an objective tokentap cannot read; it is judged without that header and its measurement marked degraded (slo_header_invalid); this is logged once",
				zap.Error(err))
		}
	}
	if x.mw.cfg.SLOHeaders == SLOHeadersStrip {
		delete(h, slo.HeaderTTFT)
		delete(h, slo.HeaderTPOT)
	}
}

// provider is the gen_ai.provider.name: configured, else the upstream host's
// provider, else the dialect's.
func (x *exchange) provider(upstreamHost string) string {
	if x.mw.cfg.Provider != "" {
		return x.mw.cfg.Provider
	}
	if p := meter.ProviderForHost(upstreamHost); p != "" {
		return p
	}
	return x.info.Provider
}

// upstream is the host and port the proxy chose, when the host says.
func (x *exchange) upstream() (host string, port int) {
	if f := x.mw.cfg.Host.Upstream; f != nil {
		return f(x.r)
	}
	return "", 0
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
	x.m.Request(x.r.URL.Path, body, truncated)
	if x.injected {
		// The request upstream asks for usage: the stream will carry it,
		// so its text needs no tokenizer.
		x.m.M.Request.IncludeUsage = true
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
				x.m.Init(d.New(), x.m.Options(), x.m.M.Start)
				x.requestRead = false
			}
		}
		x.readRequest()
		// Before Response, which may start a decompressing goroutine.
		x.captureResponse()
		// Bedrock reports a whole body's counts in its headers.
		x.m.ResponseHeader(header)
		// The provider's rate limits: a few map lookups, none of them a
		// key's header.
		if len(header) > 0 {
			ratelimit.Read(header, status, t0, &x.rateLimit)
		}
		x.m.Response(status, ct, ce)
		if x.injected && status == http.StatusOK && ce == "" && strings.HasPrefix(strings.ToLower(ct), "text/event-stream") {
			max := int(x.mw.cfg.MaxEventSize)
			if max <= 0 {
				max = sse.DefaultMaxEventSize
			}
			x.strip = &usageStripper{max: max}
		}
		host, port := x.upstream()
		x.inflight = inflightFor(host, port, x.m.M.Request.Model)
		x.inflightAhead = x.inflight.Begin()
		if t := x.mw.cfg.Live; t != nil {
			t.Join(&x.stream, live.Key{Provider: x.provider(host), Model: x.m.M.Request.Model}, x.m.Options().StallThreshold)
		}
		if model := x.m.M.Request.Model; model != "" {
			x.span.SetName(x.m.M.Operation + " " + model)
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
	x.safely("write", func() { x.m.Write(p, at) })
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
			x.m.Write(held[start:hw.end], hw.at)
			start = hw.end
		}
	})
	x.overhead += time.Since(t0)
}

// safely runs tokentap's own measuring code so that a bug in it costs this
// request its measurement and nothing else. It reports whether f returned.
func (x *exchange) safely(what string, f func()) (ok bool) {
	defer func() {
		if rec := recover(); rec != nil {
			x.broken = true
			x.m.Abandon()
			x.m.Observer().Degrade("internal_panic")
			x.mw.recordPanic(what, rec)
		}
	}()
	f()
	return true
}

// internalPanics counts panics recovered in the measuring code across all
// middlewares, for the tests.
var internalPanics atomic.Int64

// recordPanic counts a recovered panic and logs the middleware's first one
// with its stack. It may run on a meter's decompression goroutine.
func (mw *Middleware) recordPanic(what string, rec any) {
	internalPanics.Add(1)
	if mw.faults.Add(1) == 1 {
		mw.cfg.Logger.Error("recovered a panic in tokentap's measuring code; the request continues unmeasured",
			zap.String("during", what),
			zap.Any("panic", rec),
			zap.ByteString("stack", debug.Stack()))
	}
}
