// Package exchange measures LLM API exchanges as they pass through an HTTP
// server, as net/http middleware: Middleware.Serve wraps the next handler,
// and Caddy's http.handlers.tokentap (package caddymodule) is one host of
// it. It knows nothing of Caddy; what only the host can answer (the
// upstream the proxy chose, its placeholders, the path before a rewrite)
// comes through Host.
//
// One exchange goes through these phases, each in the file named:
//
//   - begin (exchange.go): the dialect from the path, the meter's clock;
//     tokentap's own request headers are taken off.
//   - prepare (exchange.go): the span starts with what the path says, the
//     trace context goes upstream, the request body is teed (tee.go) or,
//     for inject_usage, read whole and rewritten (inject.go), and content
//     capture is decided (capture.go).
//   - the response (writer.go): every byte is forwarded first; at the
//     first final status the meter learns the status and headers
//     (response, exchange.go) and the in-flight count is taken
//     (inflight.go); written bytes are held and measured after the flush
//     that sends them (feed, exchange.go), never in between.
//   - finish (finish.go): the meter's Measurement, then where it went, the
//     labels, cost, verdict and content, into one sink.Result.
//   - fan-out (fanout.go): the live stats row first, whose health goes on
//     the Result, then each sink in turn, read-only, each guarded.
//
// Measuring never alters the traffic: a panic in tokentap's own code costs
// the exchange its measurement (degraded "internal_panic"), never a byte.
// Every exchange's state is its own; the hot path takes no lock shared
// across requests and allocates nothing per write in steady state.
package exchange
