package testbin

import (
	"crypto/rand"
	"encoding/hex"
)

// Trace is a W3C trace context for one request. tokentap continues the
// trace a request carries, so the span of a request sent with its
// Traceparent is the one span with its ID, whatever else arrives: that is
// how a test finds the span of each of its requests.
type Trace struct {
	ID     string // the trace id, 32 hex digits
	Parent string // the parent span id, 16 hex digits
}

// NewTrace is a trace context with random ids.
func NewTrace() Trace {
	var b [24]byte
	_, _ = rand.Read(b[:]) // never fails: it crashes the program instead
	return Trace{ID: hex.EncodeToString(b[:16]), Parent: hex.EncodeToString(b[16:])}
}

// Traceparent is the traceparent header of a sampled request in tr.
func (tr Trace) Traceparent() string {
	return "00-" + tr.ID + "-" + tr.Parent + "-01"
}
