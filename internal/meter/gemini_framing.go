package meter

import (
	"bytes"

	"github.com/tokentap/tokentap/internal/framing/jsonarray"
	"github.com/tokentap/tokentap/sse"
)

// geminiArrayFramer adapts a jsonarray.Decoder to Framer: each element of
// streamGenerateContent's JSON array (or a bare object sent instead of it)
// reaches the dialect as one event's Data.
type geminiArrayFramer struct {
	dec  jsonarray.Decoder
	ev   sse.Event
	emit func(*sse.Event)
}

func (f *geminiArrayFramer) init(maxEvent int, emit func(*sse.Event)) {
	f.emit = emit
	f.dec.Reset()
	f.dec.MaxElementSize = maxEvent
	f.dec.OnElement = f.element
}

func (f *geminiArrayFramer) element(b []byte) {
	f.ev.Data = b
	f.emit(&f.ev)
	f.ev.Data = nil
}

func (f *geminiArrayFramer) Write(p []byte) (int, error) { return f.dec.Write(p) }

func (f *geminiArrayFramer) Close() { f.dec.Close() }

func (f *geminiArrayFramer) Oversized() int64 { return f.dec.Stats().Oversized }

// geminiSSEFramer reads alt=sse bodies. Gemini can follow its SSE events
// with a bare, pretty-printed {"error":...} object that has no data: prefix;
// an SSE decoder reads its lines as unknown fields and drops them, and the
// failure would pass as a completed stream. A line that starts with '{' is
// never SSE, so the framer diverts from there: it tracks the object's
// nesting (bounded by the event cap) and hands it out as one event, then
// gives the bytes after it back to the SSE decoder.
type geminiSSEFramer struct {
	dec  sse.Decoder
	emit func(*sse.Event)
	ev   sse.Event
	max  int

	lineStart bool // the next byte starts a line
	afterCR   bool // the last line ended in CR: an LF now is its CRLF tail

	inBare    bool   // inside an unframed object
	bare      []byte // its bytes from earlier writes
	depth     int
	inString  bool
	escaped   bool
	skipping  bool // over the cap: tracked to its end, not kept
	oversized int64
}

func (f *geminiSSEFramer) init(maxEvent int, emit func(*sse.Event)) {
	if maxEvent <= 0 {
		maxEvent = sse.DefaultMaxEventSize
	}
	f.emit = emit
	f.max = maxEvent
	f.dec.Reset()
	f.dec.MaxEventSize = maxEvent
	f.dec.OnEvent = emit
	f.lineStart, f.afterCR = true, false
	f.resetBare()
	f.oversized = 0
}

func (f *geminiSSEFramer) resetBare() {
	f.inBare = false
	f.bare = f.bare[:0]
	f.depth = 0
	f.inString, f.escaped, f.skipping = false, false, false
}

func (f *geminiSSEFramer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if f.inBare {
			p = p[f.feedBare(p):]
			continue
		}
		k := f.nextBare(p)
		if k > 0 {
			f.dec.Write(p[:k])
		}
		p = p[k:]
		if len(p) > 0 {
			f.inBare = true
		}
	}
	return n, nil
}

// nextBare returns the index of a '{' that starts a line in p, or len(p),
// keeping the line-start state across writes. Line ends are CR, LF or
// CRLF, as in SSE.
func (f *geminiSSEFramer) nextBare(p []byte) int {
	i := 0
	for i < len(p) {
		if !f.lineStart {
			j := lineEnd(p[i:])
			if j < 0 {
				return len(p)
			}
			i += j
			f.afterCR = p[i] == '\r'
			f.lineStart = true
			i++
			continue
		}
		switch c := p[i]; {
		case c == '\n' && f.afterCR:
			f.afterCR = false
		case c == '\r':
			f.afterCR = true
		case c == '\n':
		case c == '{':
			f.lineStart, f.afterCR = false, false
			return i
		default:
			f.lineStart, f.afterCR = false, false
			continue
		}
		i++
	}
	return len(p)
}

// lineEnd returns the index of the first CR or LF in p, or -1. Searching
// for the CR only before the LF keeps it to one pass over the line.
func lineEnd(p []byte) int {
	lf := bytes.IndexByte(p, '\n')
	end := lf
	if end < 0 {
		end = len(p)
	}
	if cr := bytes.IndexByte(p[:end], '\r'); cr >= 0 {
		return cr
	}
	return lf
}

// feedBare advances through an unframed object and returns how many bytes
// of p it took: up to its closing brace, or all of p.
func (f *geminiSSEFramer) feedBare(p []byte) int {
	for i, c := range p {
		switch {
		case f.escaped:
			f.escaped = false
		case f.inString:
			if c == '\\' {
				f.escaped = true
			} else if c == '"' {
				f.inString = false
			}
		case c == '"':
			f.inString = true
		case c == '{' || c == '[':
			f.depth++
		case c == '}' || c == ']':
			f.depth--
			if f.depth <= 0 {
				f.endBare(p[:i+1], false)
				return i + 1
			}
		}
	}
	if !f.skipping {
		if len(f.bare)+len(p) > f.max {
			f.skipping = true
			f.bare = f.bare[:0]
		} else {
			f.bare = append(f.bare, p...)
		}
	}
	return len(p)
}

// endBare hands out the object whose last bytes in this write are tail.
func (f *geminiSSEFramer) endBare(tail []byte, unterminated bool) {
	switch {
	case f.skipping || len(f.bare)+len(tail) > f.max:
		f.oversized++
	case len(f.bare)+len(tail) == 0:
	default:
		data := tail
		if len(f.bare) > 0 {
			f.bare = append(f.bare, tail...)
			data = f.bare
		}
		f.ev.Data = data
		f.ev.Unterminated = unterminated
		f.emit(&f.ev)
		f.ev = sse.Event{}
	}
	f.resetBare()
}

// Close dispatches what the SSE decoder still holds and then an object cut
// off by the end of the stream, which still says an error was coming.
func (f *geminiSSEFramer) Close() {
	f.dec.Close()
	if f.inBare {
		f.endBare(nil, true)
	}
	f.lineStart, f.afterCR = true, false
}

func (f *geminiSSEFramer) Oversized() int64 {
	return f.dec.Stats().Oversized + f.oversized
}
