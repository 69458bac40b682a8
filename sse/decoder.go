package sse

import (
	"bytes"
	"io"
	"math"
)

// bom is the UTF-8 byte-order mark the spec says to skip once at the start of
// a stream. It is an array, not a slice, so that re-feeding a partial match
// (bom[:k]) needs no allocation.
var bom = [3]byte{0xEF, 0xBB, 0xBF}

// bomDone marks that the start of the stream is behind us: either the BOM
// was skipped or the first bytes turned out not to be one.
const bomDone = uint8(len(bom))

// States of the line that a Write ended in the middle of. Partial comment
// and discarded lines are tracked as states instead of being buffered, so
// that a huge keep-alive or an oversized line costs no memory.
const (
	pendNone    uint8 = iota // no partial line: the next byte starts a line
	pendBuf                  // partial field line, its bytes so far in d.line
	pendComment              // partial comment line, already counted
	pendSkip                 // partial non-empty line of an oversized event
	pendNote                 // partial comment line for OnComment, counted, its bytes so far in d.line
)

// shrinkAbove bounds the buffer capacity a Decoder keeps across Reset. One
// huge event should not pin memory in a pooled decoder for the rest of the
// process; ordinary streams never reach this, so they still reuse buffers.
const shrinkAbove = 64 << 10

// The proxy plugs the decoder in wherever an io.Writer fits.
var _ io.Writer = (*Decoder)(nil)

// Decoder is an incremental, push-style text/event-stream decoder.
//
// It is written to by the proxy's ResponseWriter wrapper with the same bytes
// that go to the client, and reports events through OnEvent. The zero value
// is ready to use once OnEvent is set. A Decoder is not safe for concurrent
// use (one stream is written sequentially anyway), and OnEvent must not call
// back into the Decoder that is calling it.
type Decoder struct {
	// OnEvent is called once per dispatched event, synchronously inside Write
	// or Close, so that the event's slices can alias buffers without copying.
	// It may be nil, e.g. when only Stats are wanted.
	OnEvent func(*Event)

	// MaxEventSize caps the bytes one event may buffer (the sum of its field
	// lines, including a single over-long line; line ends and comments are
	// not counted),
	// bounding memory per stream. Zero or negative means
	// DefaultMaxEventSize. An event over the cap is skipped whole (no
	// callback for it) and counted in Stats().Oversized; decoding resumes
	// cleanly at the next event. It is never buffered whole.
	MaxEventSize int

	// ErrorField makes a non-standard `error` field count as data in an
	// event of type "error". llama.cpp's server before PR #16109 (Sept
	// 2025) reported failures that way; a spec-exact decoder drops the
	// line and the failure with it.
	ErrorField bool

	// OnComment, when set, is called with every comment line (its leading
	// ':' included, its line end not), in stream order with the events, so
	// that a reader can take what a server says in comments: the
	// simulator's send-time stamps date the events that follow them. The
	// line is valid only during the call. A comment line longer than
	// MaxEventSize is counted but not handed out. Left nil, comments cost
	// nothing: their bytes are never buffered.
	OnComment func(line []byte)

	line  []byte // bytes of a partial field line (pend == pendBuf)
	data  []byte // data buffer, each value followed by '\n'
	alias []byte // data buffer's only value, still in the caller's p (aliased)
	typ   []byte // event type buffer
	id    []byte // last event ID buffer; survives dispatch
	retry int64  // retry value of the current event, if retrySet

	size  int // bytes of completed field lines of the current event
	stats Stats
	ev    Event // handed to OnEvent; reused so dispatch does not allocate

	bom        uint8 // BOM bytes matched so far, or bomDone
	pend       uint8 // state of the partial line, pendNone..pendSkip
	aliased    bool  // data buffer is alias+"\n" (and d.data is empty)
	retrySet   bool  // a valid retry field was seen in the current event
	skipLF     bool  // last Write ended in CR: a leading LF is its CRLF tail
	discarding bool  // current event is oversized: skip to its blank line
}

// Write decodes p, calling OnEvent for every event p completes.
//
// It always returns len(p), nil, so it can sit behind an io.Writer (e.g. an
// io.TeeReader or io.MultiWriter) without ever disturbing the copy to the
// client. It does not retain p after returning: the proxy reuses its buffer.
func (d *Decoder) Write(p []byte) (int, error) {
	d.stats.Bytes += int64(len(p))
	q := p
	if d.bom != bomDone {
		q = d.skipBOM(q)
	}
	d.feed(q)
	return len(p), nil
}

// Close signals end of stream. Pending data (an event without its
// terminating blank line, even a last line without a line end) is dispatched
// with Unterminated set, because servers do end streams that way and the
// meter must not miss the final event. A pending lone CR has already ended
// its line. The stream state is then cleared, so the next Write starts a new
// stream (a BOM is allowed again).
//
// Stats are deliberately kept, so the caller can read the final counts,
// including the unterminated event, after Close; Reset zeroes them.
func (d *Decoder) Close() {
	if d.bom != bomDone {
		// The stream ended inside what looked like a BOM, so those bytes were
		// content after all.
		k := d.bom
		d.bom = bomDone
		d.feed(bom[:k])
	}
	switch d.pend {
	case pendBuf:
		d.lineEnd(d.line, false)
	case pendNote:
		d.OnComment(d.line)
	}
	d.pend = pendNone
	d.line = d.line[:0]
	if !d.discarding {
		d.dispatch(true)
	}
	d.resetStream()
}

// Reset clears all state so the Decoder can decode a new stream, keeping its
// buffers for reuse (that reuse is what makes a pooled Decoder
// allocation-free). Counters are zeroed. OnEvent and MaxEventSize are
// configuration and are left as they are.
func (d *Decoder) Reset() {
	d.resetStream()
	d.stats = Stats{}
	// Shrinking only here (not at Close) keeps Close cheap and lets a
	// caller that reuses a Decoder without Reset keep its grown buffers.
	if cap(d.line) > shrinkAbove {
		d.line = nil
	}
	if cap(d.data) > shrinkAbove {
		d.data = nil
	}
	if cap(d.typ) > shrinkAbove {
		d.typ = nil
	}
	if cap(d.id) > shrinkAbove {
		d.id = nil
	}
}

// Stats returns counters for the stream so far (or, after Close, for the
// whole stream), for the meter to log alongside token counts.
func (d *Decoder) Stats() Stats {
	return d.stats
}

// resetStream clears everything that belongs to one stream, but not the
// counters, which Close leaves readable.
func (d *Decoder) resetStream() {
	d.line = d.line[:0]
	d.id = d.id[:0]
	d.endEvent()
	d.bom = 0
	d.pend = pendNone
	d.skipLF = false
}

// maxSize returns the effective event size cap.
func (d *Decoder) maxSize() int {
	if d.MaxEventSize <= 0 {
		return DefaultMaxEventSize
	}
	return d.MaxEventSize
}

// skipBOM consumes the (possibly partial) BOM at the start of the stream and
// returns what follows it. A BOM may be split across writes, so matched bytes
// are only remembered; on a mismatch they are fed as ordinary content.
func (d *Decoder) skipBOM(p []byte) []byte {
	for len(p) > 0 && d.bom != bomDone {
		if p[0] != bom[d.bom] {
			k := d.bom
			d.bom = bomDone
			d.feed(bom[:k])
			return p
		}
		d.bom++
		p = p[1:]
	}
	return p
}

// indexFrom returns the index of the first c in p at or after from, or
// len(p) if there is none (a sentinel that sorts after every real index).
func indexFrom(p []byte, from int, c byte) int {
	if i := bytes.IndexByte(p[from:], c); i >= 0 {
		return from + i
	}
	return len(p)
}

// feed splits p into lines and processes them.
//
// The next CR and the next LF are each located with IndexByte and the result
// is kept until the scan passes it, so every byte of p is examined at most
// once per byte value: O(len(p)) however many lines p holds, with no byte-wise
// loop (bytes.IndexAny would be one for a two-byte set).
func (d *Decoder) feed(p []byte) {
	if len(p) == 0 {
		return
	}
	if d.skipLF {
		d.skipLF = false
		if p[0] == '\n' {
			p = p[1:]
		}
	}
	n := len(p)
	pos := 0
	nextCR := indexFrom(p, 0, '\r')
	nextLF := indexFrom(p, 0, '\n')
	for {
		end := min(nextCR, nextLF)
		if end == n {
			break
		}
		if d.pend == pendNone {
			d.lineEnd(p[pos:end], true)
		} else {
			d.finishPending(p[pos:end])
		}
		pos = end + 1
		if end == nextCR {
			if pos < n {
				if p[pos] == '\n' {
					pos++
				}
			} else {
				// The LF of a CRLF may start the next Write.
				d.skipLF = true
			}
			nextCR = indexFrom(p, pos, '\r')
		}
		if nextLF < pos {
			nextLF = indexFrom(p, pos, '\n')
		}
	}
	if pos < n {
		d.extendPending(p[pos:])
	}
	if d.aliased {
		// The data value still lives in p, which the caller will reuse:
		// copy it now, the only point where aliasing has to be paid for.
		d.data = append(d.data, d.alias...)
		d.data = append(d.data, '\n')
		d.alias = nil
		d.aliased = false
	}
}

// extendPending handles the bytes of a line whose end is not in this Write.
func (d *Decoder) extendPending(b []byte) {
	switch d.pend {
	case pendNone:
		if b[0] == ':' {
			// Counted now rather than at its line end, so the rest of the
			// comment need not be remembered at all unless it is to be
			// handed out.
			d.stats.Comments++
			d.pend = pendComment
			if d.OnComment != nil && len(b) <= d.maxSize() {
				d.pend = pendNote
				d.line = append(d.line[:0], b...)
			}
			return
		}
		if d.discarding {
			d.pend = pendSkip
			return
		}
		d.pend = pendBuf
	case pendBuf:
	case pendNote:
		if len(d.line)+len(b) > d.maxSize() {
			d.line = d.line[:0]
			d.pend = pendComment
			return
		}
		d.line = append(d.line, b...)
		return
	default: // pendComment, pendSkip: the line's bytes are not needed
		return
	}
	if d.size+len(d.line)+len(b) > d.maxSize() {
		// Checked before appending so that no line is ever buffered past
		// the cap, however long it grows.
		d.oversize()
		d.line = d.line[:0]
		d.pend = pendSkip
		return
	}
	d.line = append(d.line, b...)
}

// finishPending handles the last bytes b of a line that began in an earlier
// Write (b may be empty when the line end starts this Write).
func (d *Decoder) finishPending(b []byte) {
	if d.pend == pendNote {
		if len(d.line)+len(b) <= d.maxSize() {
			d.line = append(d.line, b...)
			d.OnComment(d.line)
		}
		d.line = d.line[:0]
	}
	if d.pend == pendBuf {
		if d.size+len(d.line)+len(b) > d.maxSize() {
			d.oversize()
		} else {
			d.line = append(d.line, b...)
			d.lineEnd(d.line, false)
		}
		d.line = d.line[:0]
	}
	// A pendComment or pendNote line was counted when it began; a pendSkip line is a
	// non-empty line of an oversized event, so it cannot be the blank line
	// that ends the discarding.
	d.pend = pendNone
}

// lineEnd processes one complete line. inP reports whether b lies in the
// caller's current Write buffer, in which case a data value may be aliased
// instead of copied.
func (d *Decoder) lineEnd(b []byte, inP bool) {
	if len(b) == 0 {
		if d.discarding {
			d.endEvent()
		} else {
			d.dispatch(false)
		}
		return
	}
	if b[0] == ':' {
		d.stats.Comments++
		if d.OnComment != nil && len(b) <= d.maxSize() {
			d.OnComment(b)
		}
		return
	}
	if d.discarding {
		return
	}
	if d.size+len(b) > d.maxSize() {
		d.oversize()
		return
	}
	d.size += len(b)
	d.field(b, inP)
}

// field applies one field line of the current event.
func (d *Decoder) field(b []byte, inP bool) {
	var name, value []byte
	if i := bytes.IndexByte(b, ':'); i >= 0 {
		name, value = b[:i], b[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	} else {
		name = b
	}
	switch string(name) { // no allocation: the compiler compares in place
	case "data":
		d.appendData(value, inP)
	case "event":
		d.typ = append(d.typ[:0], value...)
	case "error":
		if d.ErrorField {
			d.typ = append(d.typ[:0], "error"...)
			d.appendData(value, inP)
		}
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			d.id = append(d.id[:0], value...)
		}
	case "retry":
		if r, ok := parseRetry(value); ok {
			d.retry = r
			d.retrySet = true
		}
	}
}

// appendData appends one data value to the data buffer. The first value of an
// event is only referenced when it is still in p: most LLM events are a single
// data line followed by a blank line in the same Write, and those are then
// dispatched with no copy at all.
func (d *Decoder) appendData(v []byte, inP bool) {
	if inP && !d.aliased && len(d.data) == 0 {
		d.alias = v
		d.aliased = true
		return
	}
	if d.aliased {
		d.data = append(d.data, d.alias...)
		d.data = append(d.data, '\n')
		d.alias = nil
		d.aliased = false
	}
	d.data = append(d.data, v...)
	d.data = append(d.data, '\n')
}

// dispatch ends the current event, reporting it if its data buffer is not
// empty (per spec, an event without data lines dispatches nothing).
func (d *Decoder) dispatch(unterminated bool) {
	var data []byte
	switch {
	case d.aliased:
		data = d.alias
	case len(d.data) > 0:
		data = d.data[:len(d.data)-1]
	default:
		d.endEvent()
		return
	}
	d.stats.Events++
	if d.OnEvent != nil {
		ev := &d.ev
		ev.Type = d.typ
		ev.Data = data
		ev.ID = d.id
		ev.Retry = -1
		if d.retrySet {
			ev.Retry = d.retry
		}
		ev.Unterminated = unterminated
		d.OnEvent(ev)
		// Drop the views so the Decoder does not keep the caller's
		// buffer reachable.
		*ev = Event{}
	}
	d.endEvent()
}

// oversize abandons the current event because it crossed MaxEventSize.
func (d *Decoder) oversize() {
	d.stats.Oversized++
	d.endEvent()
	d.discarding = true
}

// endEvent clears the per-event buffers (not the last event ID, which the
// spec keeps across events).
func (d *Decoder) endEvent() {
	d.data = d.data[:0]
	d.alias = nil
	d.aliased = false
	d.typ = d.typ[:0]
	d.retrySet = false
	d.size = 0
	d.discarding = false
}

// parseRetry parses a retry value, which the spec accepts only if it is all
// ASCII digits. Values beyond int64 saturate rather than being rejected: they
// are valid per spec, merely larger than any delay that matters.
func parseRetry(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	var n int64
	saturated := false
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		if saturated {
			continue
		}
		digit := int64(c - '0')
		if n > (math.MaxInt64-digit)/10 {
			saturated = true
			continue
		}
		n = n*10 + digit
	}
	if saturated {
		n = math.MaxInt64
	}
	return n, true
}
