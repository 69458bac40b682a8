package exchange

import (
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/exchange/injectusage"
)

// inject_usage: the request rewrite and the response stripper live in
// package injectusage; this file ties them to the exchange: the log line,
// the body kept for the measurement, and the order of forwarding and
// measuring.

// injectUsage rewrites a streaming chat request that did not ask for usage
// so that it does. It returns the request to pass on and whether it changed
// it; the body it read is kept for the measurement.
func (x *exchange) injectUsage(r *http.Request) (*http.Request, bool) {
	limit := x.mw.cfg.MaxRequestBody
	r, body, res := injectusage.Request(r, limit)
	if res == injectusage.TooLarge {
		length := zap.Skip() // a chunked body's length is not known
		if r.ContentLength > limit {
			length = zap.Int64("content_length", r.ContentLength)
		}
		x.mw.cfg.Logger.Info("inject_usage: request body over max_request_body; passing it through untouched",
			length, zap.Int64("max_request_body", limit))
	}
	x.fullBody = body
	return r, res == injectusage.Injected
}

// usageStripper is the exchange's injectusage.Stripper. response makes it
// with max, the event cap (max_event_size), which writeStripped hands to
// the stripper.
type usageStripper struct {
	injectusage.Stripper
	max int
}

// writeStripped is responseWriter.Write when usage was injected: the client
// gets the stripped events, the meter the upstream's bytes as they came.
func (w *responseWriter) writeStripped(p []byte, at time.Time) (int, error) {
	x, s := w.x, w.x.strip
	if s.Passthrough() {
		n, err := w.forward(p)
		if n > 0 {
			x.feed(p[:n], at)
		}
		return n, err
	}
	s.MaxEventSize = s.max
	client, upstream := s.Strip(p)
	if s.Passthrough() {
		x.m.Observer().Degrade("inject_usage_passthrough")
	}
	var err error
	if len(client) > 0 {
		_, err = w.forward(client)
	}
	if len(upstream) > 0 {
		x.feed(upstream, at)
	}
	return len(p), err
}

// flushPending forwards, untouched, a partial event still held when the
// upstream's response ended (a truncated stream): no byte is ever lost.
func (w *responseWriter) flushPending() {
	s := w.x.strip
	if s == nil {
		return
	}
	if rest := s.Flush(); len(rest) > 0 {
		_, _ = w.forward(rest)
		w.x.feed(rest, time.Now())
	}
}
