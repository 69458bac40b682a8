package sse

// What the last byte a Splitter saw was, when it was a CR that ended a line:
// an LF next is then the rest of a CRLF, not a line end of its own.
const (
	crNone  uint8 = iota
	crLine        // a CR ended a line with bytes in it
	crEvent       // a CR ended a blank line, and with it an event
)

// Splitter finds where events end in a stream's bytes without decoding
// them, for a caller that passes the stream on as it came, event by event,
// and must neither hold an event back past its end nor cut one in two
// (inject_usage edits each complete event and holds only the partial one).
// It reads line ends as Decoder does (LF, CRLF, a bare CR, a CRLF split
// across writes, a BOM at the start), so the events it delimits are the ones
// Decoder dispatches.
//
// An event ends with the line end of the blank line after it. When that
// line end is a CR that ends a write, the event is reported there rather
// than held for the byte after it, which a bare-CR stream would only send
// with the next event; if the next write then begins with the LF of a CRLF,
// that LF comes back as a piece of its own, which decodes to nothing. A
// blank line with no event before it is likewise a piece of its own.
//
// The zero value is ready for the start of a stream. Like Decoder, a
// Splitter keeps no reference to what it is given and allocates nothing:
// it carries three bytes of state between writes, and the ends it reports
// go into the caller's slice.
type Splitter struct {
	bom    uint8 // BOM bytes matched so far, or bomDone
	cr     uint8 // crNone, crLine or crEvent
	inLine bool  // the line being read has bytes, so its end is no blank line
}

// AppendEnds scans p, the stream's next bytes, and appends to ends the
// offset in p just past each event that p ends, in order. Each byte is
// examined once, however the stream is split into writes.
func (s *Splitter) AppendEnds(ends []int, p []byte) []int {
	n := len(p)
	pos := 0
	if s.bom != bomDone {
		pos = s.skipBOM(p)
	}
	if s.cr != crNone && pos < n {
		if p[pos] == '\n' {
			pos++
			if s.cr == crEvent {
				ends = append(ends, pos)
			}
		}
		s.cr = crNone
	}
	nextCR := indexFrom(p, pos, '\r')
	nextLF := indexFrom(p, pos, '\n')
	for {
		end := min(nextCR, nextLF)
		if end == n {
			break
		}
		blank := end == pos && !s.inLine
		s.inLine = false
		pos = end + 1
		if end == nextCR {
			switch {
			case pos == n:
				// The LF of a CRLF may start the next write; the event,
				// if this was its blank line, ends here regardless.
				s.cr = crLine
				if blank {
					s.cr = crEvent
				}
			case p[pos] == '\n':
				pos++
			}
			nextCR = indexFrom(p, pos, '\r')
		}
		if nextLF < pos {
			nextLF = indexFrom(p, pos, '\n')
		}
		if blank {
			ends = append(ends, pos)
		}
	}
	if pos < n {
		s.inLine = true
	}
	return ends
}

// skipBOM consumes the (possibly partial) BOM at the start of the stream,
// returning how many bytes of p it took. Matched bytes that turn out not to
// be a BOM were the first line's content.
func (s *Splitter) skipBOM(p []byte) int {
	for i, c := range p {
		if c != bom[s.bom] {
			if s.bom > 0 {
				s.inLine = true
			}
			s.bom = bomDone
			return i
		}
		s.bom++
		if s.bom == bomDone {
			return i + 1
		}
	}
	return len(p)
}
