package simulator

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/tokentap/tokentap/internal/simulator/stamp"
)

// scheduler waits for absolute deadlines counted from the request's arrival,
// so that the time spent writing one chunk does not delay all later ones,
// and gives up as soon as the client is gone. It runs on the handler's own
// goroutine: nothing it starts can outlive the request.
type scheduler struct {
	ctx   context.Context
	start time.Time
	timer *time.Timer
}

func newScheduler(r *http.Request, start time.Time) *scheduler {
	return &scheduler{ctx: r.Context(), start: start}
}

// until waits until offset after the start and reports whether the request
// is still alive.
func (s *scheduler) until(offset time.Duration) bool {
	d := time.Until(s.start.Add(offset))
	if d <= 0 {
		return s.ctx.Err() == nil
	}
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d) // safe without draining since Go 1.23's timers
	}
	select {
	case <-s.timer.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

func (s *scheduler) stop() {
	if s.timer != nil {
		s.timer.Stop()
	}
}

// eventWriter writes whole SSE events and pushes each to the client at once,
// since the time a chunk leaves is the quantity being simulated.
type eventWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
	// stamp prefixes each write with its send time (HeaderStamp), built in
	// buf so that the comment and the events leave in one write.
	stamp bool
	buf   []byte
}

func (e *eventWriter) send(b []byte) bool {
	if e.stamp {
		// The clock is read after the events were rendered, so the stamp
		// leaves out the simulator's own rendering; only the copy into
		// buf separates it from the write.
		e.buf = stamp.Append(e.buf[:0], time.Now(), bytes.HasSuffix(b, []byte("\r\n")))
		e.buf = append(e.buf, b...)
		b = e.buf
	}
	if _, err := e.w.Write(b); err != nil {
		return false
	}
	if err := e.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return false
	}
	return true
}

// declareTrailers announces the schedule trailers; it must precede
// WriteHeader. The count is not also sent as a header: a proxy that copies
// headers and trailers into one map would then send it twice.
func declareTrailers(w http.ResponseWriter) {
	w.Header().Set("Trailer", Trailers)
}

// setTrailers reports the schedule of the content tokens actually sent.
func setTrailers(w http.ResponseWriter, p *Plan) {
	h := w.Header()
	h.Set(HeaderOutputTokens, strconv.Itoa(p.Sent()))
	if p.Sent() > 0 {
		h.Set(HeaderTimeToFirstToken, seconds(p.TimeToFirstToken()))
		h.Set(HeaderLastToken, seconds(p.LastToken()))
	}
}

func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// serveStream sends p as its format's stream: what precedes the first token
// at once, each token's event at its scheduled time, then the format's end
// (finish, usage, terminator), or the planned fault instead of it.
func serveStream(w http.ResponseWriter, s *scheduler, p *Plan, stamp bool) {
	enc := p.f.stream(p)
	h := w.Header()
	h.Set("Content-Type", enc.contentType())
	h.Set("Cache-Control", "no-cache")
	declareTrailers(w)
	w.WriteHeader(http.StatusOK)

	out := &eventWriter{w: w, rc: http.NewResponseController(w), stamp: stamp}
	if !enc.start(out.send) {
		return
	}
	n := p.Sent()
	for i := range n {
		if !s.until(p.Offsets[i]) || !out.send(enc.token(i)) {
			return
		}
	}
	if p.Fault != FaultNone {
		if !s.until(p.faultAt()) {
			return
		}
		switch p.Fault {
		case FaultAbort:
			panic(http.ErrAbortHandler)
		case FaultError:
			if !enc.fail(out.send) {
				return
			}
		}
		setTrailers(w, p)
		return
	}
	if enc.end(out.send) {
		setTrailers(w, p)
	}
}

// serveBody sends p as its format's non-streamed body once the whole output
// would have been generated, or the planned fault at its time. Its trailers
// still carry the token schedule, which is what a measuring proxy that sees
// only the whole body is to be compared with.
func serveBody(w http.ResponseWriter, s *scheduler, p *Plan) {
	due := p.LastToken()
	if p.Fault != FaultNone {
		due = p.faultAt()
	}
	if !s.until(due) {
		return
	}
	switch p.Fault {
	case FaultAbort:
		panic(http.ErrAbortHandler)
	case FaultError:
		writeAPIError(w, p.f, statusError(http.StatusInternalServerError))
		return
	}
	body, contentType, textStart := p.f.body(p)
	if p.Fault == FaultTruncate {
		body = body[:textStart+len(p.text(p.FaultAfter))]
	}
	w.Header().Set("Content-Type", contentType)
	declareTrailers(w)
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(body); err == nil {
		setTrailers(w, p)
	}
}
