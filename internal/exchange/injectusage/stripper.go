package injectusage

import (
	"bytes"

	"github.com/tokentap/tokentap/sse"
)

// bom is the UTF-8 byte-order mark a stream may start with: it stays, and
// the first event is read after it.
var bom = []byte("\xEF\xBB\xBF")

// Stripper takes back out of a text/event-stream response what [Rewrite]
// added to its request. It is given the upstream's bytes write by write and
// gives back, for each, what the client gets now: the events those bytes
// complete, edited. The partial event at the end of a write is held until
// its end comes, because an edit needs the whole event and a client must
// not get half of one whose other half then changes.
//
// Events it does not recognise as the chunks include_usage changes
// (comments, several data lines, other fields, [DONE]) pass as they came,
// and so does everything once the stream shows no event end within
// MaxEventSize bytes: that is not a stream it can edit, and holding more
// would cost memory without end.
//
// The zero value is ready. A Stripper keeps no reference to the bytes it is
// given, and allocates nothing once its buffers have grown to the stream's
// events.
type Stripper struct {
	// MaxEventSize caps the bytes held for one event. Zero or less means
	// sse.DefaultMaxEventSize, the cap the meter's decoder has by default.
	MaxEventSize int

	split sse.Splitter
	ends  []int
	// held is the event not yet complete, from done: bytes before done were
	// handed back by the last Strip and are dropped by the next.
	held []byte
	done int
	out  []byte
	// started is set at the first event, the only one a BOM can precede.
	started bool
	// dropLF is set when the event just removed ended with a CR: if the
	// next write starts with the LF of that CRLF, the Splitter gives it
	// alone, and it goes with the event.
	dropLF      bool
	passthrough bool
}

// Strip takes the upstream's next bytes, p, and returns what the client
// gets now and, for a measurement that must read what the upstream sent,
// the upstream's bytes that stands for, as they came: the events p
// completes, with their part held from earlier writes (or, when the
// stripper turns to passthrough, all that was held and p). Both are valid
// until the next call, and empty when p completes no event.
func (s *Stripper) Strip(p []byte) (client, upstream []byte) {
	if s.passthrough {
		return p, p
	}
	s.held = s.held[:copy(s.held, s.held[s.done:])]
	s.done = 0
	s.ends = s.split.AppendEnds(s.ends[:0], p)
	if len(s.ends) == 0 {
		s.held = append(s.held, p...)
		if len(s.held) > s.maxEventSize() {
			all := s.held
			s.passThrough()
			return all, all
		}
		return nil, nil
	}
	// The first event may have begun in an earlier write: it is edited
	// whole, so then p joins it. Otherwise the events are read in p itself.
	buf, base := p, 0
	if len(s.held) > 0 {
		base = len(s.held)
		s.held = append(s.held, p...)
		buf = s.held
	}
	s.out = s.out[:0]
	start := 0
	for _, e := range s.ends {
		s.out = s.appendEvent(s.out, buf[start:base+e])
		start = base + e
	}
	if len(buf)-start > s.maxEventSize() {
		s.out = append(s.out, buf[start:]...)
		s.passThrough()
		return s.out, buf
	}
	if base > 0 {
		s.done = start
	} else {
		s.held = append(s.held, p[start:]...)
	}
	return s.out, buf[:start]
}

// Flush returns the partial event still held when the response ends, as it
// came, and forgets it: a truncated stream loses no byte. It is valid until
// the next call.
func (s *Stripper) Flush() []byte {
	rest := s.held[s.done:]
	s.held, s.done = s.held[:0], 0
	return rest
}

// Passthrough reports whether the stripper has stopped editing, having seen
// no event end within MaxEventSize; from then on Strip returns its input.
func (s *Stripper) Passthrough() bool { return s.passthrough }

// appendEvent appends what the client gets for one complete event.
func (s *Stripper) appendEvent(dst, ev []byte) []byte {
	if s.dropLF {
		s.dropLF = false
		if len(ev) == 1 && ev[0] == '\n' {
			return dst
		}
	}
	if !s.started {
		s.started = true
		if bytes.HasPrefix(ev, bom) {
			dst = append(dst, bom...)
			ev = ev[len(bom):]
		}
	}
	n := len(dst)
	dst = appendClientEvent(dst, ev)
	s.dropLF = len(dst) == n && ev[len(ev)-1] == '\r'
	return dst
}

// passThrough stops editing: what is held is being handed back as it came,
// and everything after it passes untouched.
func (s *Stripper) passThrough() {
	s.passthrough = true
	s.held, s.done = s.held[:0], 0
}

func (s *Stripper) maxEventSize() int {
	if s.MaxEventSize <= 0 {
		return sse.DefaultMaxEventSize
	}
	return s.MaxEventSize
}
