package exchange

import (
	"net/http"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/cost"
	"github.com/tokentap/tokentap/internal/live"
	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/meter/usagecheck"
	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/slo"
)

// Config is what the host resolved at provisioning: it is read, never
// written, while exchanges are served, so that they share no lock.
type Config struct {
	// Provider is gen_ai.provider.name when set; else the upstream host's
	// provider, else the dialect's.
	Provider string
	// Dialect forces the API format; nil chooses it from the request path,
	// then from the response's media type.
	Dialect *meter.DialectInfo

	// MaxRequestBody caps the copy of the request body kept to read its
	// parameters; 0 keeps none.
	MaxRequestBody int64
	// MaxResponseBody caps a non-streamed body kept to read its usage.
	MaxResponseBody int64
	// MaxEventSize caps one streamed event; 0 is the framing's default.
	MaxEventSize int64
	// StallThreshold is the gap between chunks that counts as a stall.
	StallThreshold time.Duration
	// Estimator counts the output of streams that report no usage; nil
	// estimates with the meter's heuristic.
	Estimator meter.Estimator
	// VerifyUsage checks a sampled share of exchanges' reported output
	// count against their text (package usagecheck); nil checks none.
	VerifyUsage *usagecheck.Verifier

	// InjectUsage asks OpenAI-style streams for their usage and strips
	// what that added from the response (package injectusage).
	InjectUsage bool
	// Capture records prompts and completions, each bounded by
	// MaxContentSize bytes of JSON.
	Capture        bool
	MaxContentSize int64
	// ConversationID is the template of gen_ai.conversation.id, evaluated
	// by Host.Replace when the span starts; empty sets none.
	ConversationID string
	// Labels are the user's own dimensions, evaluated at the end.
	Labels []Label

	// Prices price each exchange; nil or empty prices none.
	Prices *cost.Table
	// CostFromEstimates prices exchanges whose output was estimated.
	CostFromEstimates bool
	// SLOs judge each exchange; nil or empty judges none.
	SLOs *slo.Table
	// SLOHeaders reads a caller's own objective for one request
	// (slo.HeaderTTFT, slo.HeaderTPOT), which then judges that request
	// instead of SLOs; off ignores the headers and passes them on.
	SLOHeaders SLOHeaders

	// Rows keeps the live per-row statistics; nil keeps none.
	Rows Rows
	// Live counts the exchanges in flight right now, and the stalled
	// ones, per provider and model; nil counts none.
	Live *live.Table
	// Sinks get each finished exchange, in order, after Rows.
	Sinks []Named

	Tracer     trace.Tracer
	Propagator propagation.TextMapPropagator
	Logger     *zap.Logger
	Host       Host

	// Release is called once Close was called and the last exchange begun
	// before it has ended: what the exchanges export through (providers,
	// files) must outlive a reload until then.
	Release func()
}

// SLOHeaders says whether requests may state their own objective, and
// whether the headers that state it go on upstream.
type SLOHeaders uint8

const (
	// SLOHeadersOff ignores the headers; they pass on untouched.
	SLOHeadersOff SLOHeaders = iota
	// SLOHeadersStrip reads them and removes them before the upstream.
	SLOHeadersStrip
	// SLOHeadersKeep reads them and passes them on, for an upstream
	// that routes on them too.
	SLOHeadersKeep
)

// Host answers what only the server running the middleware knows. Each
// field may be nil; the zero Host is plain net/http's answer.
type Host struct {
	// Upstream is the host and port the proxy chose for r, once it chose.
	Upstream func(r *http.Request) (host string, port int)
	// Replace evaluates a template against r (the host's placeholders);
	// nil leaves templates as written.
	Replace func(r *http.Request, template string) string
	// OriginalPath is the path the client asked for, before a rewrite;
	// nil takes r's.
	OriginalPath func(r *http.Request) string
	// ErrorType names an error the next handler returned (the status the
	// host will answer with); nil names every one _OTHER.
	ErrorType func(err error) string
}

// Label is one configured label, ready to resolve.
type Label struct {
	Name     string
	Template string
	// Values admits the label's values, up to its cap, process-wide.
	Values *otelexport.ValueSet
}

// Rows records a finished exchange in its live stats row and reports
// whether the row is slow. The exchange calls it before any sink, and puts
// the answer on the Result (sink.Result.RowSlow): the order lives here, in
// code, and every sink treats the Result as read-only.
type Rows interface {
	Record(r *sink.Result) (rowSlow bool)
}

// Named is a sink with the name its recovered panics are logged under. The
// one named "span" ends the exchange's span: if it fails, the span is
// still ended, at the measured end.
type Named struct {
	Name string
	sink.Sink
}

// Middleware measures the exchanges that pass through it. It is safe for
// concurrent use; each exchange's state is its own.
type Middleware struct {
	cfg     Config
	logOnce onceLog
	lease   lease
	// faults counts panics recovered in the measuring code, so that only
	// the first is logged.
	faults atomic.Int64
	// onDecompressPanic is the meter's OnPanic, built once: a closure
	// made per exchange would be one more allocation per request.
	onDecompressPanic func(any)
}

// New returns the middleware for cfg, which it keeps and does not change.
func New(cfg Config) *Middleware {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if cfg.Propagator == nil {
		cfg.Propagator = propagation.NewCompositeTextMapPropagator()
	}
	mw := &Middleware{cfg: cfg}
	mw.lease.release = cfg.Release
	mw.onDecompressPanic = func(rec any) { mw.recordPanic("decompressed body", rec) }
	return mw
}

// Serve measures the exchange while next carries it: next writes the
// response through a writer that forwards every byte first and measures
// after. Upgrades (WebSockets, CONNECT) pass through unmeasured. A panic
// in next ends the measurement and goes on, so that net/http drops the
// connection as it would have.
func (mw *Middleware) Serve(w http.ResponseWriter, r *http.Request, next func(http.ResponseWriter, *http.Request) error) error {
	if isUpgrade(r) {
		return next(w, r)
	}
	mw.lease.acquire()
	defer mw.lease.done()
	x := mw.begin(r)
	r = x.prepare(r)
	ww := &responseWriter{ResponseWriter: w, x: x}
	defer func() {
		if rec := recover(); rec != nil {
			// reverse_proxy aborts a broken stream by panicking with
			// http.ErrAbortHandler; the span must still end.
			abort := meter.OutcomeUpstreamError
			if ww.writeErr != nil || r.Context().Err() != nil {
				abort = meter.OutcomeClientAbort
			}
			ww.end()
			x.finish(abort, "stream_aborted")
			panic(rec)
		}
	}()
	err := next(ww, r)
	ww.end()
	ww.flushPending()
	switch {
	case err == nil && x.m.M.StatusCode == 499 && r.Context().Err() != nil:
		// reverse_proxy answers for a client that left before the
		// upstream did with a 499 of its own and no error.
		x.finish(meter.OutcomeClientAbort, "")
	case err == nil:
		x.finish(meter.OutcomeUnknown, "")
	case r.Context().Err() != nil:
		x.finish(meter.OutcomeClientAbort, "")
	default:
		x.finish(meter.OutcomeUpstreamError, mw.errorType(err))
	}
	return err
}

// Handler is Serve as plain net/http middleware: next writes the response,
// and a panic in it ends the measurement as an upstream error.
func (mw *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = mw.Serve(w, r, func(w http.ResponseWriter, r *http.Request) error {
			next.ServeHTTP(w, r)
			return nil
		})
	})
}

// Close lets go of what the exchanges export through (Config.Release) once
// the last exchange in flight has ended; a reload does not wait for them.
// The host calls it once it routes no new request to the middleware.
func (mw *Middleware) Close() { mw.lease.close() }

func (mw *Middleware) errorType(err error) string {
	if mw.cfg.Host.ErrorType != nil {
		return mw.cfg.Host.ErrorType(err)
	}
	return "_OTHER"
}

func isUpgrade(r *http.Request) bool {
	return r.Method == http.MethodConnect || r.Header.Get("Upgrade") != ""
}
