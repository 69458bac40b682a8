package caddymodule

import (
	"github.com/caddyserver/caddy/v2"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tokentap/tokentap/meter"
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
)

// logVarNames lists every variable recordLogFields may set, so that each
// exchange also clears the ones it did not observe: a second tokentap in the
// same request's chain must not leave the first one's values behind.
var logVarNames = [...]string{
	logProvider, logOperation, logDialect, logRequestModel, logResponseModel,
	logResponseID, logInputTokens, logOutputTokens, logCacheReadInputTokens,
	logCacheCreationInputTokens, logReasoningOutputTokens, logUsageSource,
	logTimeToFirstToken, logOutputTokensPerSecond, logOutcome, logErrorType,
	logFinishReasons, logTraceID, logSpanID,
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
	usage                        meter.Usage
	// timeToFirstToken is in seconds; 0 when no token arrived.
	timeToFirstToken float64
	// rate is the output tokens/s; hasRate is false when undefined.
	rate          float64
	hasRate       bool
	outcome       string
	errorType     string
	finishReasons []string
	// traceID and spanID name tokentap's span, to go from a log line to
	// its trace; empty when the span context is invalid.
	traceID, spanID string
}

// newLogEntry copies what the log needs from a finished exchange.
func newLogEntry(f *finished) *logEntry {
	m := f.m
	e := &logEntry{
		provider:      f.provider,
		operation:     m.Operation,
		dialect:       m.Dialect,
		requestModel:  m.Request.Model,
		responseModel: m.ResponseModel,
		responseID:    m.ResponseID,
		usage:         m.Usage,
		outcome:       m.Outcome.String(),
		errorType:     m.ErrorType,
		finishReasons: finishReasons(m.FinishReasons),
	}
	if m.FirstToken > 0 {
		e.timeToFirstToken = m.FirstToken.Seconds()
	}
	e.rate, e.hasRate = m.OutputTokensPerSecond()
	if f.ctx != nil {
		if sc := trace.SpanContextFromContext(f.ctx); sc.IsValid() {
			e.traceID, e.spanID = sc.TraceID().String(), sc.SpanID().String()
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
	if u := &e.usage; u.Source != meter.UsageAbsent {
		// A negative count is one the provider did not report.
		for _, c := range []struct {
			name string
			n    int64
		}{
			{logInputTokens, u.InputTokens},
			{logOutputTokens, u.OutputTokens},
			{logCacheReadInputTokens, u.CacheReadInputTokens},
			{logCacheCreationInputTokens, u.CacheCreationInputTokens},
			{logReasoningOutputTokens, u.ReasoningOutputTokens},
		} {
			if c.n >= 0 {
				num(c.name, c.n)
			}
		}
	}
	str(logUsageSource, e.usage.Source.String())
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

// recordLogFields adds a finished exchange's measurement to Caddy's access
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
func (x *exchange) recordLogFields(f *finished) {
	ctx := x.r.Context()
	e := newLogEntry(f)
	if extra, ok := ctx.Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		// Set, not Add: a second tokentap in the chain replaces the entry
		// rather than writing a duplicate key.
		extra.Set(zap.Object(logFieldKey, e))
	}
	repl, ok := ctx.Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return
	}
	for _, key := range logVarKeys {
		repl.Delete(key)
	}
	e.each(
		func(name, v string) { repl.Set(logVarKeys[name], v) },
		func(name string, v int64) { repl.Set(logVarKeys[name], v) },
		func(name string, v float64) { repl.Set(logVarKeys[name], v) },
	)
	if len(e.finishReasons) > 0 {
		// A placeholder is a string: one reason per choice, in choice
		// order, as the log's array has them.
		repl.Set(logVarKeys[logFinishReasons], strings.Join(e.finishReasons, ","))
	}
}
