// Package meter turns the bytes of one LLM API exchange into a Measurement:
// timings (time to first byte, chunk, token and visible token), token usage
// with its source, the response model, id and finish reasons, stream health
// and the outcome.
//
// It knows nothing of Caddy or OpenTelemetry, so the same code can sit behind a
// Caddy handler, a plain net/http middleware or an http.RoundTripper. The
// caller feeds it what passed on the wire, in order, with the time each piece
// arrived; it never sees, holds or alters the traffic itself.
//
// A Meter is owned by one request and used from one goroutine at a time; it
// takes no locks. Per-event work is a single gjson pass over a complete event,
// with no allocation in steady state, because it runs on the path of every
// streamed byte.
package meter
