// Package probe sends a small, fixed streaming request to each configured
// route and model at an interval, so that a model whose traffic is thin
// still has a baseline in the live stats and its slowdown detector keeps
// being fed.
//
// A probe goes through tokentap's own route, like a client's request, so
// that it is measured exactly as live traffic is and lands in the same
// stats row; the only difference is the Header it carries, whose value is
// a token made once per process (Token). The tokentap handler recognises
// it (Recognize), marks the exchange as a probe and removes the header
// before the request goes upstream: a client cannot forge the label
// without the process's token, and the upstream never sees it.
//
// Probes are bounded: at most one request per target per interval (at
// least MinInterval), at most one in flight per target (a tick that finds
// the previous probe still running is skipped and counted, never queued),
// each bounded by a timeout and by MaxTokensLimit output tokens. The
// request is sent and its stream read to the end by package loadgen's
// client, whose numbers are discarded: tokentap measures the probe on its
// way through.
//
// The package imports neither Caddy nor OpenTelemetry; caddymodule's
// tokentap_probe app is the thin adapter that configures and runs it.
package probe
