// Package loadgen is a load generator for streaming LLM APIs (OpenAI Chat
// Completions and Anthropic Messages) that measures what a client sees:
// time to first token, output tokens per second and inter-token latency,
// per model, at p50/p95/p99.
//
// It exists for two users. People comparing models or endpoints run it as
// `tokentap load` against any endpoint, several models in one run so that
// they share the same conditions; and tokentap benchmarks itself with it
// (bench/overhead), where the same client code drives four paths and its
// per-request results are compared with what tokentap measured.
//
// Every run is bounded: by a number of requests, a duration or both, and
// each request by a timeout. Requests are driven either closed-loop (a fixed
// number of concurrent clients, each sending its next request as soon as the
// last one ended) or open-loop (requests started at a fixed rate, with a cap
// on how many are in flight).
//
// The client reads each response as an SSE stream, timing every line by the
// read that completed it. It knows the simulator's stamp comments: when a
// stream carries them, every event's delivery delay (arrival minus the
// upstream's write, one clock) is in the request's Result. It reads them
// with package stamp, not the simulator, so that the load generator
// links no Caddy.
package loadgen
