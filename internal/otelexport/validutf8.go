package otelexport

import (
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// withValidUTF8 returns spans with every string made valid UTF-8. Model
// names, ids, error types and label values come from traffic, and OTLP's
// protobuf encoding refuses an invalid string, failing the export of the
// whole batch the span is in; each invalid byte sequence becomes U+FFFD
// instead. It runs on the exporter's goroutine, never on the request path,
// and allocates only for a span that needs fixing.
func withValidUTF8(spans []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for i, s := range spans {
		if spanIsValidUTF8(s) {
			if out != nil {
				out[i] = s
			}
			continue
		}
		if out == nil {
			out = make([]sdktrace.ReadOnlySpan, len(spans))
			copy(out, spans[:i])
		}
		out[i] = newValidSpan(s)
	}
	if out == nil {
		return spans
	}
	return out
}

func spanIsValidUTF8(s sdktrace.ReadOnlySpan) bool {
	if !utf8.ValidString(s.Name()) || !utf8.ValidString(s.Status().Description) || !attributesAreValidUTF8(s.Attributes()) {
		return false
	}
	for _, ev := range s.Events() {
		if !utf8.ValidString(ev.Name) || !attributesAreValidUTF8(ev.Attributes) {
			return false
		}
	}
	return true
}

func attributesAreValidUTF8(kvs []attribute.KeyValue) bool {
	for _, kv := range kvs {
		if !utf8.ValidString(string(kv.Key)) {
			return false
		}
		switch kv.Value.Type() {
		case attribute.STRING:
			if !utf8.ValidString(kv.Value.AsString()) {
				return false
			}
		case attribute.STRINGSLICE:
			for _, v := range kv.Value.AsStringSlice() {
				if !utf8.ValidString(v) {
					return false
				}
			}
		}
	}
	return true
}

// validSpan is a span with its strings made valid UTF-8; everything else
// is the original's.
type validSpan struct {
	sdktrace.ReadOnlySpan
	name   string
	attrs  []attribute.KeyValue
	events []sdktrace.Event
	status sdktrace.Status
}

func newValidSpan(s sdktrace.ReadOnlySpan) *validSpan {
	v := &validSpan{
		ReadOnlySpan: s,
		name:         validUTF8(s.Name()),
		attrs:        validAttributes(s.Attributes()),
		status:       s.Status(),
	}
	v.status.Description = validUTF8(v.status.Description)
	for _, ev := range s.Events() {
		ev.Name = validUTF8(ev.Name)
		ev.Attributes = validAttributes(ev.Attributes)
		v.events = append(v.events, ev)
	}
	return v
}

func validAttributes(kvs []attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, len(kvs))
	for i, kv := range kvs {
		key := attribute.Key(validUTF8(string(kv.Key)))
		switch kv.Value.Type() {
		case attribute.STRING:
			out[i] = key.String(validUTF8(kv.Value.AsString()))
		case attribute.STRINGSLICE:
			vs := kv.Value.AsStringSlice()
			for j := range vs {
				vs[j] = validUTF8(vs[j])
			}
			out[i] = key.StringSlice(vs)
		default:
			out[i] = attribute.KeyValue{Key: key, Value: kv.Value}
		}
	}
	return out
}

func (v *validSpan) Name() string                     { return v.name }
func (v *validSpan) Attributes() []attribute.KeyValue { return v.attrs }
func (v *validSpan) Events() []sdktrace.Event         { return v.events }
func (v *validSpan) Status() sdktrace.Status          { return v.status }

// validUTF8 returns s, or s with each invalid byte sequence replaced by
// U+FFFD; it allocates only in the second case. Models, ids, finish reasons,
// error types and label values come from the wire, and OTLP and Prometheus
// carry strings that must be UTF-8: one bad value would make an exporter
// drop a whole batch, or a scrape fail.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
