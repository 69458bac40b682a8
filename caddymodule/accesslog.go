package caddymodule

import (
	"context"
	"encoding/hex"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/sink"
)

// logFieldKey is the field of Caddy's access log entry that holds the
// measurement, as one object, so that it cannot collide with Caddy's own
// fields or with a user's log_append.
const logFieldKey = "tokentap"

// replPrefix prefixes the placeholders under which each exchange's
// measurement is published, so that any directive that runs after the
// response can use it, e.g. {http.vars.tokentap.output_tokens} in
// log_append. docs/telemetry.md lists the names; they are the access log
// field's member names behind this prefix.
const replPrefix = "http.vars.tokentap."

// Member names of the access log object, which are also the placeholder
// names behind replPrefix. Users' log pipelines and Caddyfiles depend on them.
const (
	logProvider                 = "provider"
	logOperation                = "operation"
	logDialect                  = "dialect"
	logRequestModel             = "request_model"
	logResponseModel            = "response_model"
	logResponseID               = "response_id"
	logInputTokens              = "input_tokens"
	logOutputTokens             = "output_tokens"
	logCacheReadInputTokens     = "cache_read_input_tokens"
	logCacheCreationInputTokens = "cache_creation_input_tokens"
	logReasoningOutputTokens    = "reasoning_output_tokens"
	logUsageSource              = "usage_source"
	logTimeToFirstToken         = "time_to_first_token"
	logOutputTokensPerSecond    = "output_tokens_per_second"
	logOutcome                  = "outcome"
	logErrorType                = "error_type"
	logFinishReasons            = "finish_reasons"
	logTraceID                  = "trace_id"
	logSpanID                   = "span_id"
	logProbe                    = "probe"
)

// logTokenNames are the members of each token count.
var logTokenNames = [sink.NumTokenKinds]string{
	sink.InputTokens:              logInputTokens,
	sink.OutputTokens:             logOutputTokens,
	sink.CacheReadInputTokens:     logCacheReadInputTokens,
	sink.CacheCreationInputTokens: logCacheCreationInputTokens,
	sink.ReasoningOutputTokens:    logReasoningOutputTokens,
}

// logVarNames lists every variable Record may set.
var logVarNames = [...]string{
	logProvider, logOperation, logDialect, logRequestModel, logResponseModel,
	logResponseID, logInputTokens, logOutputTokens, logCacheReadInputTokens,
	logCacheCreationInputTokens, logReasoningOutputTokens, logUsageSource,
	logTimeToFirstToken, logOutputTokensPerSecond, logOutcome, logErrorType,
	logFinishReasons, logTraceID, logSpanID, logProbe,
}

// logVarKeys maps each name of logVarNames to its placeholder, replPrefix
// and the name, built once: joining them per request cost two allocations
// a variable, a third of all that an exchange allocated.
var logVarKeys = func() map[string]string {
	keys := make(map[string]string, len(logVarNames))
	for _, name := range logVarNames {
		keys[name] = replPrefix + name
	}
	return keys
}()

// logEntry is what the access log and the placeholders carry of one
// exchange: the values a person reading a log line asks about first, each
// only when it was observed. It is a copy, taken when the exchange ends, so
// the log encoder (which runs after ServeHTTP returns) shares nothing with
// the exchange.
type logEntry struct {
	provider, operation, dialect string
	requestModel, responseModel  string
	responseID                   string
	// tokens holds each count, negative when not known.
	tokens      [sink.NumTokenKinds]int64
	usageSource string
	// timeToFirstToken is in seconds; 0 when no token arrived.
	timeToFirstToken float64
	// rate is the output tokens/s; hasRate is false when undefined.
	rate          float64
	hasRate       bool
	outcome       string
	errorType     string
	finishReasons []string
	// traceID and spanID name tokentap's span, to go from a log line to
	// its trace; empty when the span context is invalid. They are views of
	// traceHex and spanHex, which the entry owns and never changes.
	traceID, spanID string
	traceHex        [32]byte
	spanHex         [16]byte
	// probe is set on this process's probes (sink.Result.Probe); the
	// member and the placeholder are left out otherwise.
	probe bool
}

// newLogEntry copies what the log needs from a finished exchange.
func newLogEntry(r *sink.Result) *logEntry {
	m := r.M
	e := &logEntry{
		provider:      r.Provider,
		operation:     m.Operation,
		dialect:       m.Dialect,
		requestModel:  m.Request.Model,
		responseModel: m.ResponseModel,
		responseID:    m.ResponseID,
		usageSource:   m.Usage.Source.String(),
		outcome:       m.Outcome.String(),
		errorType:     m.ErrorType,
		finishReasons: otelexport.FinishReasons(m),
		probe:         r.Probe,
	}
	for k := range e.tokens {
		n, ok := r.Tokens(sink.TokenKind(k))
		if !ok {
			n = -1
		}
		e.tokens[k] = n
	}
	if m.FirstToken > 0 {
		e.timeToFirstToken = m.FirstToken.Seconds()
	}
	e.rate, e.hasRate = m.OutputTokensPerSecond()
	if r.Ctx != nil {
		if sc := trace.SpanContextFromContext(r.Ctx); sc.IsValid() {
			tid, sid := sc.TraceID(), sc.SpanID()
			hex.Encode(e.traceHex[:], tid[:])
			hex.Encode(e.spanHex[:], sid[:])
			e.traceID = unsafe.String(&e.traceHex[0], len(e.traceHex))
			e.spanID = unsafe.String(&e.spanHex[0], len(e.spanHex))
		}
	}
	return e
}

// each calls str, num or float for every observed value, in the access log's
// order, so that the log object and the variables cannot disagree.
func (e *logEntry) each(str func(name, v string), num func(name string, v int64), float func(name string, v float64)) {
	for _, s := range []struct{ name, v string }{
		{logProvider, e.provider},
		{logOperation, e.operation},
		{logDialect, e.dialect},
		{logRequestModel, e.requestModel},
		{logResponseModel, e.responseModel},
		{logResponseID, e.responseID},
	} {
		if s.v != "" {
			str(s.name, s.v)
		}
	}
	for k, n := range e.tokens {
		if n >= 0 {
			num(logTokenNames[k], n)
		}
	}
	str(logUsageSource, e.usageSource)
	if e.timeToFirstToken > 0 {
		float(logTimeToFirstToken, e.timeToFirstToken)
	}
	if e.hasRate {
		float(logOutputTokensPerSecond, e.rate)
	}
	str(logOutcome, e.outcome)
	if e.errorType != "" {
		str(logErrorType, e.errorType)
	}
	if e.traceID != "" {
		str(logTraceID, e.traceID)
		str(logSpanID, e.spanID)
	}
}

// MarshalLogObject writes the entry as the members of the access log's
// tokentap object. It runs only if an access log is enabled and writes the
// entry.
func (e *logEntry) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	e.each(enc.AddString, enc.AddInt64, enc.AddFloat64)
	if e.probe {
		enc.AddBool(logProbe, true)
	}
	if len(e.finishReasons) > 0 {
		return enc.AddArray(logFinishReasons, zapcore.ArrayMarshalerFunc(func(arr zapcore.ArrayEncoder) error {
			for _, r := range e.finishReasons {
				arr.AppendString(r)
			}
			return nil
		}))
	}
	return nil
}

// accessLog is the access log sink: it puts each exchange's measurement in
// Caddy's access log entry and in placeholders.
type accessLog struct{}

// Record adds a finished exchange's measurement to Caddy's access
// log entry for the request (the "tokentap" object) and publishes it as
// placeholders ({http.vars.tokentap.*}) for directives that run after the
// response, such as log_append. It runs before ServeHTTP returns, because
// the access log is written after the handler chain returns, also when
// reverse_proxy aborts with a panic.
//
// The placeholders are set on the request's Replacer, which has a lock of
// its own and is consulted before the request's variables, not written into
// the variables map: net/http's transport may still be dialing for this
// request on another goroutine (a dial it started before an idle connection
// came free), and reverse_proxy's dialer reads that map unlocked.
func (accessLog) Record(r *sink.Result) {
	ctx := r.Ctx
	e := newLogEntry(r)
	if extra, ok := ctx.Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok && accessLogged(ctx) {
		// Set, not Add: a second tokentap in the chain replaces the entry
		// rather than writing a duplicate key.
		extra.Set(zap.Object(logFieldKey, e))
	}
	repl, ok := ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return
	}
	// Whatever an earlier handler left under tokentap's prefix goes, so
	// that no value this exchange did not observe survives it: one pass
	// under the replacer's lock rather than a lock per name.
	repl.DeleteByPrefix(replPrefix)
	e.each(
		func(name, v string) { repl.Set(logVarKeys[name], boxedVar(name, v)) },
		func(name string, v int64) { repl.Set(logVarKeys[name], v) },
		func(name string, v float64) { repl.Set(logVarKeys[name], v) },
	)
	if e.probe {
		repl.Set(logVarKeys[logProbe], true)
	}
	if len(e.finishReasons) > 0 {
		// A placeholder is a string: one reason per choice, in choice
		// order, as the log's array has them.
		repl.Set(logVarKeys[logFinishReasons], strings.Join(e.finishReasons, ","))
	}
}

// accessLogged reports whether the request's server writes an access
// log. Caddy reads the extra log fields only for that entry, and setting
// one costs several allocations (a boxed field, and the fields' handler
// cache cleared), so without an access log the entry is not set. When the
// server is not known, it is.
func accessLogged(ctx context.Context) bool {
	srv, ok := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	return !ok || srv == nil || srv.Logs != nil
}

// boxedVars holds the placeholder values that come from a small, fixed
// set (outcomes, usage sources, dialects, operations, providers) already
// boxed, so that publishing them allocates nothing: each string put in a
// placeholder is otherwise copied to the heap, and these repeat on every
// request. Values from the wire (models, ids) are never kept here.
var boxedVars struct {
	mu   sync.Mutex
	vals atomic.Pointer[map[string]any]
}

// maxBoxedVars bounds boxedVars: providers come from the configuration
// and operations from the dialects, but a bound costs nothing.
const maxBoxedVars = 256

// boxedVar returns v as a placeholder value, from boxedVars for the
// members whose values repeat.
func boxedVar(name, v string) any {
	switch name {
	case logProvider, logOperation, logDialect, logUsageSource, logOutcome:
	default:
		return v
	}
	if m := boxedVars.vals.Load(); m != nil {
		if b, ok := (*m)[v]; ok {
			return b
		}
	}
	boxedVars.mu.Lock()
	defer boxedVars.mu.Unlock()
	old := boxedVars.vals.Load()
	if old != nil {
		if b, ok := (*old)[v]; ok {
			return b
		}
		if len(*old) >= maxBoxedVars {
			return v
		}
	}
	next := make(map[string]any, 1+len(derefBoxed(old)))
	for k, b := range derefBoxed(old) {
		next[k] = b
	}
	k := strings.Clone(v)
	var b any = k
	next[k] = b
	boxedVars.vals.Store(&next)
	return b
}

func derefBoxed(m *map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return *m
}
