package caddymodule

import (
	"io"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// responseWriter forwards every call to the client first and measures after,
// so measurement never alters a byte. It never keeps the caller's buffer:
// reverse_proxy reuses it as soon as Write returns.
//
// A streamed event is measured after it is flushed, not between its Write
// and its flush: reverse_proxy writes an event, then flushes it, and work
// done in Write would delay the event on its way to the client by as much.
// So Write keeps a copy of what it forwarded (held) and FlushError measures
// it once the flush has returned.
//
// Flushing, hijacking and deadlines reach the real writer through Unwrap
// (promoted from ResponseWriterWrapper), which http.ResponseController
// follows.
type responseWriter struct {
	*caddyhttp.ResponseWriterWrapper
	x           *exchange
	wroteHeader bool
	// writeErr is the first error writing to the client: a failed write
	// means the client is gone, which tells a client abort from an
	// upstream failure when reverse_proxy aborts the stream.
	writeErr error
	// held is a copy of the last write, not yet measured; heldAt is when it
	// was written, the time the meter gives its events.
	held   []byte
	heldAt time.Time
}

// maxHeldWrite bounds the copy a write is held in: a larger write (a body
// written whole rather than a streamed event) is measured at once, so that
// holding costs a stream at most this much memory.
const maxHeldWrite = 4 << 10

// WriteHeader forwards the status, then lets the measurement see the final
// status and headers. 1xx statuses pass through unmeasured; 101 (an upgrade)
// switches measuring off for the exchange.
func (w *responseWriter) WriteHeader(status int) {
	w.ResponseWriterWrapper.WriteHeader(status)
	if w.wroteHeader {
		return
	}
	if status == http.StatusSwitchingProtocols {
		w.wroteHeader = true
		w.x.broken = true
		return
	}
	if status >= 200 {
		w.wroteHeader = true
		w.x.response(status, w.Header())
	}
}

// Write forwards p to the client, then holds what was written for the meter
// until the flush that follows.
func (w *responseWriter) Write(p []byte) (int, error) {
	at := time.Now()
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.x.strip != nil {
		return w.writeStripped(p, at)
	}
	n, err := w.forward(p)
	if n > 0 {
		w.measureLater(p[:n], at)
	}
	return n, err
}

// measureLater holds a copy of p, written at at, to be measured after the
// next flush. A write that comes with no flush since the last one has the
// held write measured first, so the meter sees the bytes in order; one
// larger than maxHeldWrite is measured at once.
func (w *responseWriter) measureLater(p []byte, at time.Time) {
	w.measureHeld()
	if len(p) > maxHeldWrite || w.x.broken {
		w.x.feed(p, at)
		return
	}
	w.held = append(w.held[:0], p...)
	w.heldAt = at
}

// measureHeld feeds the held write, if any, to the meter: after a flush,
// before the next write, and when the response ends.
func (w *responseWriter) measureHeld() {
	if len(w.held) == 0 {
		return
	}
	w.x.feed(w.held, w.heldAt)
	w.held = w.held[:0]
}

// forward writes to the client, remembering the first failure.
func (w *responseWriter) forward(p []byte) (int, error) {
	n, err := w.ResponseWriterWrapper.Write(p)
	if err != nil && w.writeErr == nil {
		w.writeErr = err
	}
	return n, err
}

// ReadFrom keeps io.Copy callers (file_server, respond, error pages) on the
// measured Write path; the embedded wrapper's ReadFrom would go straight to
// the client and bypass the measurement.
func (w *responseWriter) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(writerOnly{w}, r)
}

// FlushError flushes the client connection. Declaring it lets callers that
// type-assert http.Flusher-style interfaces flush without unwrapping.
func (w *responseWriter) FlushError() error {
	if !w.wroteHeader {
		// Flushing commits an implicit 200; say so, so the measurement sees
		// the status and a later Write does not send a second header.
		w.WriteHeader(http.StatusOK)
	}
	err := http.NewResponseController(w.ResponseWriterWrapper).Flush() //nolint:bodyclose
	w.measureHeld()
	return err
}

// Flush is FlushError for callers that use the http.Flusher interface.
func (w *responseWriter) Flush() {
	_ = w.FlushError()
}

// writerOnly hides ReadFrom so io.Copy falls back to Write.
type writerOnly struct{ io.Writer }

// Interface guards
var (
	_ http.ResponseWriter = (*responseWriter)(nil)
	_ http.Flusher        = (*responseWriter)(nil)
	_ io.ReaderFrom       = (*responseWriter)(nil)
)
