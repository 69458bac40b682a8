// Package simulator is a deterministic simulated LLM API: the Caddy HTTP
// handler http.handlers.tokentap_simulator (Caddyfile directive
// tokentap_simulator), which speaks the OpenAI Chat Completions wire format,
// streaming and not.
//
// It exists so that tokentap can be demonstrated, tested and benchmarked
// without a real provider, and above all against a known truth: tokentap
// measures time to first token and decode rate on streams passing through
// it, and a measurement is only checkable if the stream's real schedule is
// known. The simulator emits each token at a planned offset from the
// request's arrival (absolute deadlines, so write time never accumulates
// into drift), reports that plan in response trailers, and exposes it
// without HTTP through Handler.Plan. The same request to the same config
// always yields the same bytes, so proxied and direct responses can be
// compared byte for byte.
//
// Faults that a measuring proxy must survive (error statuses, mid-stream
// error events, truncated streams, cut connections) are injected by config
// or per request by Tokentap-Sim-* headers, which pass through a proxy
// untouched.
package simulator
