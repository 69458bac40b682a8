// Package inflight counts the requests in flight to each upstream and
// model across the whole process, so that each exchange can say how many
// others it shared its upstream with when its response began (the span's
// tokentap.inflight): a slow stream under load and a slow stream alone are
// different findings.
//
// The table is process-wide on purpose: a Caddy reload starts new handlers
// while the old ones' streams run on, and both load the same upstream.
// Like package meter it knows nothing of Caddy or OpenTelemetry.
package inflight
