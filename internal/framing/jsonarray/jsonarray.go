// Package jsonarray is a push decoder for one streamed JSON array, the body
// Gemini's streamGenerateContent sends without alt=sse and Vertex AI sends by
// default: `[{...}\r\n,\r\n{...}\r\n]`, each element one response chunk.
//
// A JSON parser would need the whole array before it returns anything, so a
// proxy reading the body that way would see the first chunk only when the
// last one arrived: time to first token would equal total latency, and the
// proxy would hold the whole response in memory. Decoder instead hands out
// each top-level element as soon as its last byte arrives. Like package sse
// and package ndjson it is fed arbitrary byte splits, tracks string, escape
// and nesting state across writes so no byte is scanned twice, never keeps
// the caller's buffer, allocates nothing in steady state, and skips (and
// counts) elements over a size cap instead of buffering them.
//
// A top-level value that is not an array (Gemini may answer with a bare
// {"error":...} object instead of an array) is handed out whole as one
// element, and so is every value after the array closes. The decoder frames;
// it does not validate: an element is the bytes between its first byte and
// the byte that closes it, which for valid JSON is exactly the element.
package jsonarray

import "bytes"

// DefaultMaxElementSize caps one element when Decoder.MaxElementSize is
// zero. Response chunks are a few KiB; a large inline image is the outlier
// that the cap is for.
const DefaultMaxElementSize = 1 << 20

// shrinkAbove bounds the buffer a Decoder keeps across Reset, so one huge
// element does not pin memory in a pooled decoder.
const shrinkAbove = 64 << 10

// Stats counts what a Decoder saw.
type Stats struct {
	Elements  int64 // elements handed out
	Oversized int64 // elements skipped for exceeding MaxElementSize
	Bytes     int64 // bytes fed
	// Errors counts framing faults: a closing bracket with nothing open, an
	// element cut off by Close, an array left open at Close.
	Errors int64
}

// Kinds of element being read.
const (
	kindNone      uint8 = iota // between values
	kindContainer              // an object or array, until its depth is 0
	kindString                 // a bare string, until its closing quote
	kindScalar                 // a number or literal, until a delimiter
)

// Decoder cuts a streamed JSON array into its elements. The zero value is
// ready to use. It is not safe for concurrent use, and OnElement must not
// call back into the Decoder.
type Decoder struct {
	// OnElement is called once per complete element with its raw bytes,
	// without surrounding whitespace or commas. The slice aliases the
	// caller's Write buffer or the Decoder's own and is valid only during
	// the call.
	OnElement func(elem []byte)
	// MaxElementSize caps an element's bytes; a longer element is skipped
	// whole and counted in Stats().Oversized. Zero means
	// DefaultMaxElementSize.
	MaxElementSize int

	buf      []byte // the start of an element split across writes
	depth    int    // open brackets inside the current container element
	kind     uint8  // what the current element is, kindNone between values
	inArray  bool   // inside the top-level array
	inString bool   // inside a string of the current element
	escaped  bool   // the previous byte was a backslash inside a string
	skipping bool   // the current element is over the cap: track, don't keep
	stats    Stats
}

// Write decodes p, calling OnElement for every element p completes. It
// always returns len(p), nil, so it can sit behind an io.Writer without ever
// failing the stream it observes.
func (d *Decoder) Write(p []byte) (int, error) {
	d.stats.Bytes += int64(len(p))
	// start is where the current element's bytes in p begin: 0 when it
	// began in an earlier write.
	start := 0
	i := 0
	for i < len(p) {
		switch d.kind {
		case kindNone:
			c := p[i]
			switch c {
			case ' ', '\t', '\r', '\n', ',':
				i++
				continue
			case '[':
				if !d.inArray {
					d.inArray = true
					i++
					continue
				}
				d.kind, d.depth = kindContainer, 1
			case '{':
				d.kind, d.depth = kindContainer, 1
			case ']':
				if d.inArray {
					d.inArray = false
				} else {
					d.stats.Errors++
				}
				i++
				continue
			case '}':
				d.stats.Errors++
				i++
				continue
			case '"':
				d.kind, d.inString = kindString, true
			default:
				d.kind = kindScalar
			}
			start = i
			i++
		case kindContainer:
			i = d.scanContainer(p, i)
			if d.kind == kindNone {
				d.end(p[start:i])
			}
		case kindString:
			i = d.scanString(p, i)
			if !d.inString {
				d.end(p[start:i])
			}
		case kindScalar:
			for i < len(p) && !isDelim(p[i]) {
				i++
			}
			if i < len(p) {
				// The delimiter is not part of the scalar: it is read
				// again between values.
				d.end(p[start:i])
			}
		}
	}
	if d.kind != kindNone {
		d.carry(p[start:])
	}
	return len(p), nil
}

// scanContainer advances through an object or array element from p[i] and
// returns the index after its closing bracket, or len(p). It sets kind to
// kindNone when the element is complete.
func (d *Decoder) scanContainer(p []byte, i int) int {
	for i < len(p) {
		if d.inString {
			i = d.scanString(p, i)
			continue
		}
		c := p[i]
		i++
		switch c {
		case '"':
			d.inString = true
		case '{', '[':
			d.depth++
		case '}', ']':
			d.depth--
			if d.depth == 0 {
				d.kind = kindNone
				return i
			}
		}
	}
	return i
}

// scanString advances through a string from p[i] and returns the index after
// its closing quote, or len(p), clearing inString at the quote. The next
// quote is found with IndexByte and kept until an escape passes it, and
// backslashes are looked for only before it, so a string costs one pass
// however many escapes it holds.
func (d *Decoder) scanString(p []byte, i int) int {
	q := -1
	for i < len(p) {
		if d.escaped {
			d.escaped = false
			i++
			continue
		}
		if q < i {
			q = indexFrom(p, i, '"')
		}
		if b := indexFrom(p[:q], i, '\\'); b < q {
			d.escaped = true
			i = b + 1
			continue
		}
		if q == len(p) {
			return q
		}
		d.inString = false
		return q + 1
	}
	return i
}

// indexFrom returns the index of the first c in p at or after from, or
// len(p) when there is none.
func indexFrom(p []byte, from int, c byte) int {
	if i := bytes.IndexByte(p[from:], c); i >= 0 {
		return from + i
	}
	return len(p)
}

// end hands out the element whose bytes in the current write are tail.
func (d *Decoder) end(tail []byte) {
	d.kind = kindNone
	switch {
	case d.skipping:
		d.stats.Oversized++
	case len(d.buf)+len(tail) > d.max():
		d.stats.Oversized++
	case len(d.buf) == 0:
		d.emit(tail)
	default:
		d.buf = append(d.buf, tail...)
		d.emit(d.buf)
	}
	d.buf = d.buf[:0]
	d.skipping = false
}

func (d *Decoder) emit(elem []byte) {
	d.stats.Elements++
	if d.OnElement != nil {
		d.OnElement(elem)
	}
}

// carry keeps the start of an element that continues in the next write,
// unless that would pass the cap: then the element is only tracked.
func (d *Decoder) carry(b []byte) {
	if d.skipping {
		return
	}
	if len(d.buf)+len(b) > d.max() {
		d.skipping = true
		d.buf = d.buf[:0]
		return
	}
	d.buf = append(d.buf, b...)
}

func (d *Decoder) max() int {
	if d.MaxElementSize <= 0 {
		return DefaultMaxElementSize
	}
	return d.MaxElementSize
}

// Close ends the stream. A number or literal pending at the end is complete
// and handed out; an object, array or string cut off is not, and is counted
// as an error (or as oversized, if it was already over the cap), as is an
// array left open. The stream state is then cleared; Stats are kept.
func (d *Decoder) Close() {
	switch {
	case d.kind == kindNone:
	case d.kind == kindScalar:
		d.end(nil)
	case d.skipping:
		d.stats.Oversized++
	default:
		d.stats.Errors++
	}
	if d.inArray {
		d.stats.Errors++
	}
	d.resetStream()
}

// Reset clears the decoder for a new stream, keeping its buffer unless one
// huge element grew it.
func (d *Decoder) Reset() {
	d.resetStream()
	d.stats = Stats{}
	if cap(d.buf) > shrinkAbove {
		d.buf = nil
	}
}

func (d *Decoder) resetStream() {
	d.buf = d.buf[:0]
	d.depth = 0
	d.kind = kindNone
	d.inArray = false
	d.inString = false
	d.escaped = false
	d.skipping = false
}

// Stats returns the counters so far.
func (d *Decoder) Stats() Stats { return d.stats }

// isDelim reports whether c ends a number or literal: whitespace, a
// separator, or the start or end of another value.
func isDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', ',', ']', '}', '[', '{', '"':
		return true
	}
	return false
}
