// Package simulator is a deterministic simulated LLM API: the Caddy HTTP
// handler http.handlers.tokentap_simulator (Caddyfile directive
// tokentap_simulator), which speaks the wire formats of OpenAI Chat
// Completions and Responses, Anthropic Messages, Gemini (SSE with CRLF
// framing, the streamed JSON array and the one-body form) and Ollama's
// native NDJSON API, streaming and not, each chosen by the request's path.
//
// It exists so that tokentap can be demonstrated, tested and benchmarked
// without a real provider, and above all against a known truth: tokentap
// measures time to first token and decode rate on streams passing through
// it, and a measurement is only checkable if the stream's real schedule is
// known. The simulator emits each token at a planned offset from the
// request's arrival (absolute deadlines, so write time never accumulates
// into drift), reports that plan in response trailers, and exposes it
// without HTTP through Handler.Plan and Handler.PlanTarget. The same request
// to the same config always yields the same bytes (ids come from a hash of
// the body, timestamps from a fixed epoch plus the schedule), so proxied and
// direct responses can be compared byte for byte.
//
// Each format is written as the provider writes it, traps included:
// Anthropic's event:+data: pairs with whitespace-padded JSON and pings,
// Responses' sequence numbers and obfuscation padding, Gemini's CRLF line
// ends, missing terminator and bare mid-stream error, Ollama's default
// streaming and nanosecond durations. The scheduler, the plan, the faults,
// the trailers and the headers are shared; only a small internal format
// interface differs per provider.
//
// Faults that a measuring proxy must survive (error statuses, mid-stream
// error events, truncated streams, cut connections) are injected by config
// or per request by Tokentap-Sim-* headers, which pass through a proxy
// untouched.
//
// For benchmarks, HeaderStamp makes every write of an SSE stream carry its
// send time in an SSE comment, so that a client on the same machine can
// measure each event's delivery delay through any proxy on one clock. The
// comment's format is package stamp's, which clients read without
// importing the simulator.
package simulator
