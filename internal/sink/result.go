// Package sink says what a finished exchange is to everything that records
// it: the Result and the Sink contract, and no sink.
//
// A Result is built once, when an exchange ends, recorded in its live
// stats row (package stats), and handed to each Sink in turn: the span and
// the metrics (package otelexport), the recording (package recording) and
// Caddy's access log (package caddymodule). Sinks read it and do not
// change it. Rules that every sink must apply alike, such as which token
// counts are known, are methods of Result, so that a new Measurement field
// or a new sink is an edit in one place.
package sink

import (
	"context"
	"time"

	"github.com/tokentap/tokentap/internal/capture"
	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/meter/usagecheck"
	"github.com/tokentap/tokentap/internal/ratelimit"
	"github.com/tokentap/tokentap/internal/slo"
)

// Result is one finished exchange as the sinks see it. Sinks read it and
// must not keep it or anything it points to past Record: the adapter may
// reuse it.
type Result struct {
	// Ctx carries the exchange's span (for the span sink to end, for
	// exemplars and for the access log's trace id) and the request's
	// values (Caddy's replacer and log fields).
	Ctx context.Context
	// M is the finished measurement.
	M *meter.Measurement
	// End is when the exchange ended, the span's end.
	End time.Time
	// Provider is the gen_ai.provider.name: configured, else the
	// upstream host's, else the dialect's.
	Provider string
	// Host and Port are the upstream the proxy chose ("" and 0 when it
	// set none).
	Host string
	Port int
	// Route is the path the client requested, before any handle_path
	// stripped it, without the query (which can carry an API key).
	Route string
	// Labels are the configured labels, resolved for this request and
	// capped, sorted by name.
	Labels []Label
	// Inflight is how many requests to the same upstream and model were
	// in flight when this one's response began; InflightKnown is false
	// when no response began, and Inflight says nothing.
	Inflight      int64
	InflightKnown bool
	// Overhead is the time the proxy spent measuring this exchange on
	// the request's goroutine.
	Overhead time.Duration
	// Probe is set when the request was one of this process's probes
	// (package probe): it is measured and filed like any other request, so
	// that it gives its model's stats row a baseline, and marked so that
	// spans, metrics and logs can tell it from client traffic.
	Probe bool
	// Cost is what the exchange cost in US dollars, when HasCost: the
	// handler has a price for its model and its counts may be billed by.
	// Unpriced is set when it has prices but none for this model.
	Cost     float64
	HasCost  bool
	Unpriced bool
	// SLO is the verdict of the objective the request stated for itself
	// (SLOFromRequest), else of the one configured for the model
	// (slo.NotJudged when none applies).
	SLO            slo.Verdict
	SLOFromRequest bool
	// RowSlow is set when the result's live stats row was slow (package
	// drift) once this result was counted there, which happens before any
	// sink runs: the span marks a request measured during a slowdown.
	RowSlow bool
	// Content is the captured prompt and completion, when content capture
	// is on for this exchange and its span is recorded; zero otherwise.
	Content Content
	// UsageCheck is verify_usage's check of the reported output count,
	// when it sampled this exchange; zero (usagecheck.NotSampled)
	// otherwise.
	UsageCheck usagecheck.Result
	// RateLimit is what the response's headers said of the caller's rate
	// limits and, on a throttled answer, how long to wait (package
	// ratelimit); zero when they said nothing. It is on the Result rather
	// than the Measurement because it is read from headers, not from the
	// body the dialects decode.
	RateLimit ratelimit.Headers
}

// Label is one user-defined dimension, resolved for one request.
type Label struct {
	Name, Value string
}

// Content is an exchange's captured content, each part as the GenAI
// conventions' JSON; a part with empty JSON was not captured.
type Content struct {
	System, Input, Output capture.Result
}

// Captured reports whether any part was captured.
func (c *Content) Captured() bool {
	return c.System.JSON != "" || c.Input.JSON != "" || c.Output.JSON != ""
}

// Model is the model a result is filed under: the one that answered, else
// the one asked for.
func (r *Result) Model() string {
	if r.M.ResponseModel != "" {
		return r.M.ResponseModel
	}
	return r.M.Request.Model
}

// Sink records finished exchanges. Record is called once per exchange on
// the request's goroutine, after the response was written; it must not
// block on I/O, nor change r, nor keep it. A panic in one sink costs that
// sink's record of the exchange and nothing else (package exchange
// recovers it).
type Sink interface {
	Record(r *Result)
}
