package exchange

import (
	"io"
	"net/http"
	"sync"
	"time"
)

// responseWriter forwards every call to the client first and measures after,
// so measurement never alters a byte. It never keeps the caller's buffer:
// reverse_proxy reuses it as soon as Write returns.
//
// A streamed event is measured after it is flushed, not between its Write
// and its flush: reverse_proxy writes an event, then flushes it, and work
// done in Write would delay the event on its way to the client by as much.
// So Write keeps a copy of what it forwarded (held), with the time of each
// write, and the meter reads the held writes after a flush, in batches of
// up to maxHeldWrites: in a proxy serving many streams, a stream's meter
// state and the reading code have gone cold by its next event, and reading
// eight events in a row pays for that once, not eight times
// (BenchmarkMeterInterleaved; its figures in test/bench/results). Every event
// keeps the time it was written; nothing reads the measurement before the
// response ends, when the rest is read.
//
// Flushing, hijacking and deadlines reach the real writer through Unwrap,
// which http.ResponseController follows.
//
// The fields every Write and flush reads come first, in one cache line: in
// a proxy serving many streams a stream's writer is cold by its next
// event, and each line it touches is a miss.
type responseWriter struct {
	http.ResponseWriter
	x *exchange
	// strip is x.strip, copied once the response began, so that Write
	// need not load the exchange to learn it.
	strip *usageStripper
	// held is a copy of the writes not yet measured, in order; heldWrites
	// are where each ends in held and when it was written, the time the
	// meter gives its events.
	held        []byte
	nHeld       int32
	wroteHeader bool
	// writeErr is the first error writing to the client: a failed write
	// means the client is gone, which tells a client abort from an
	// upstream failure when reverse_proxy aborts the stream.
	writeErr   error
	heldWrites [maxHeldWrites]heldWrite
	// heldBuf is the pooled buffer held came from, given back by release.
	heldBuf *[]byte
}

// heldPool keeps held buffers between requests: grown from nothing, a
// stream's buffer took a handful of allocations per request, and their
// garbage.
var heldPool = sync.Pool{New: func() any {
	b := make([]byte, 0, heldBatchBytes)
	return &b
}}

// heldWrite is one write in responseWriter.held.
type heldWrite struct {
	end int
	at  time.Time
}

const (
	// maxHeldWrites is how many writes are read in one batch.
	maxHeldWrites = 8
	// heldBatchBytes ends a batch early when its writes are long, so that
	// holding costs a stream little memory.
	heldBatchBytes = 2 << 10
	// maxHeldBytes bounds held: a write that does not fit is read at
	// once, after what was held before it (a body written whole rather
	// than a streamed event).
	maxHeldBytes = 4 << 10
)

// WriteHeader forwards the status, then lets the measurement see the final
// status and headers. 1xx statuses pass through unmeasured; 101 (an upgrade)
// switches measuring off for the exchange.
func (w *responseWriter) WriteHeader(status int) {
	w.ResponseWriter.WriteHeader(status)
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
		w.strip = w.x.strip
	}
}

// Write forwards p to the client, then holds what was written for the meter
// until the flush that follows.
func (w *responseWriter) Write(p []byte) (int, error) {
	at := time.Now()
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	// The stall clock runs per write, not per measured batch: a stream
	// whose events are held is not stalled.
	w.x.stream.Wrote(at)
	if w.strip != nil {
		return w.writeStripped(p, at)
	}
	n, err := w.forward(p)
	if n > 0 {
		w.measureLater(p[:n], at)
	}
	return n, err
}

// measureLater holds a copy of p, written at at, to be measured after a
// flush. Held writes are measured first when p does not fit beside them, so
// the meter sees the bytes in order; one larger than maxHeldBytes is
// measured at once.
func (w *responseWriter) measureLater(p []byte, at time.Time) {
	if w.nHeld == maxHeldWrites || len(w.held)+len(p) > maxHeldBytes {
		w.measureHeld()
	}
	if len(p) > maxHeldBytes || w.x.broken {
		w.x.feed(p, at)
		return
	}
	if w.held == nil {
		w.heldBuf = heldPool.Get().(*[]byte)
		w.held = *w.heldBuf
	}
	w.held = append(w.held, p...)
	w.heldWrites[w.nHeld] = heldWrite{end: len(w.held), at: at}
	w.nHeld++
}

// batchDue reports whether the held writes make a batch to measure at the
// next flush.
func (w *responseWriter) batchDue() bool {
	return w.nHeld == maxHeldWrites || len(w.held) >= heldBatchBytes
}

// measureHeld feeds the held writes, if any, to the meter: after the flush
// that completes a batch, before a write that does not fit, and when the
// response ends.
func (w *responseWriter) measureHeld() {
	if w.nHeld == 0 {
		return
	}
	w.x.feedWrites(w.held, w.heldWrites[:w.nHeld])
	w.held, w.nHeld = w.held[:0], 0
}

// release gives the held buffer back to heldPool once the response has
// ended and what was held was measured. measureLater never lets held pass
// maxHeldBytes, so no buffer in the pool is larger.
func (w *responseWriter) release() {
	if w.heldBuf == nil {
		return
	}
	*w.heldBuf = w.held[:0]
	heldPool.Put(w.heldBuf)
	w.held, w.heldBuf = nil, nil
}

// forward writes to the client, remembering the first failure.
func (w *responseWriter) forward(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	if err != nil && w.writeErr == nil {
		w.writeErr = err
	}
	return n, err
}

// ReadFrom keeps io.Copy callers (file_server, respond, error pages) on the
// measured Write path; the client's own ReadFrom would bypass the
// measurement.
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
	err := http.NewResponseController(w.ResponseWriter).Flush() //nolint:bodyclose
	if w.batchDue() {
		w.measureHeld()
	}
	return err
}

// Flush is FlushError for callers that use the http.Flusher interface.
func (w *responseWriter) Flush() {
	_ = w.FlushError()
}

// Unwrap gives http.ResponseController the client's writer, for
// hijacking, deadlines and full duplex.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Push passes an HTTP/2 push on, where the client's writer can.
func (w *responseWriter) Push(target string, opts *http.PushOptions) error {
	if p, ok := w.ResponseWriter.(http.Pusher); ok {
		return p.Push(target, opts)
	}
	return http.ErrNotSupported
}

// end measures what is still held, once the response has ended, and gives
// the held buffer back.
func (w *responseWriter) end() {
	w.measureHeld()
	w.release()
}

// writerOnly hides ReadFrom so io.Copy falls back to Write.
type writerOnly struct{ io.Writer }

// Interface guards
var (
	_ http.ResponseWriter = (*responseWriter)(nil)
	_ http.Flusher        = (*responseWriter)(nil)
	_ io.ReaderFrom       = (*responseWriter)(nil)
	_ http.Pusher         = (*responseWriter)(nil)
)
