// Package otelexport is tokentap's OpenTelemetry export, with no Caddy in
// it: the process-wide TracerProvider and MeterProvider and their lifetime
// across config reloads, the standard OTEL_* environment, the span export
// pipeline that counts and reports what it loses, the metric instruments
// and their buckets, the span and metric attributes, and the caps on
// distinct attribute values that come from traffic.
//
// Spans and Instruments are the two sinks (package sink) that turn a
// finished exchange into telemetry. Adding an exporter is an edit to this
// package alone; the Caddy adapter only acquires the providers when a
// handler is provisioned and releases them when it is gone.
package otelexport
