package capture

import (
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// Result is the value of one content attribute.
type Result struct {
	// JSON is the attribute's value; "" when there is nothing to record.
	JSON string
	// Truncated is set when anything was cut to fit the size bound (or
	// was missing from the source, such as a request body longer than the
	// proxy copies).
	Truncated bool
}

// ellipsis marks where a content field was cut.
const ellipsis = "…"

// A limit is how a content field is written.
const (
	// whole writes every content field whole.
	whole = -1
	// skeleton writes every content field as "", to measure the shape.
	skeleton = -2
)

// encoder writes messages or parts as the conventions' JSON. limit caps
// each content field's encoded length (with the quotes left out), or is
// whole or skeleton; cut is set when a field was cut.
type encoder struct {
	buf   []byte
	limit int
	cut   bool
}

func (e *encoder) messages(msgs []Message) {
	e.buf = append(e.buf, '[')
	for i := range msgs {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.message(&msgs[i])
	}
	e.buf = append(e.buf, ']')
}

func (e *encoder) message(m *Message) {
	e.buf = append(e.buf, `{"role":`...)
	e.buf = appendString(e.buf, m.Role)
	if m.Name != "" {
		e.buf = append(e.buf, `,"name":`...)
		e.buf = appendString(e.buf, m.Name)
	}
	e.buf = append(e.buf, `,"parts":`...)
	e.parts(m.Parts)
	if m.hasFinish {
		e.buf = append(e.buf, `,"finish_reason":`...)
		e.buf = appendString(e.buf, m.FinishReason)
	}
	e.buf = append(e.buf, '}')
}

func (e *encoder) parts(ps []Part) {
	e.buf = append(e.buf, '[')
	for i := range ps {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.part(&ps[i])
	}
	e.buf = append(e.buf, ']')
}

func (e *encoder) part(p *Part) {
	e.buf = append(e.buf, `{"type":`...)
	e.buf = appendString(e.buf, p.Type)
	field := func(name, v string) {
		if v != "" {
			e.buf = append(e.buf, `,"`...)
			e.buf = append(e.buf, name...)
			e.buf = append(e.buf, `":`...)
			e.buf = appendString(e.buf, v)
		}
	}
	switch p.Type {
	case typeText, typeReasoning:
		e.buf = append(e.buf, `,"content":`...)
		e.content(p.Content, false)
	case typeToolCall:
		field("id", p.ID)
		e.buf = append(e.buf, `,"name":`...)
		e.buf = appendString(e.buf, p.Name)
		if len(p.Args) > 0 {
			e.buf = append(e.buf, `,"arguments":`...)
			e.content(p.Args, true)
		}
	case typeToolCallResponse:
		field("id", p.ID)
		e.buf = append(e.buf, `,"response":`...)
		e.content(p.Response, true)
	case typeBlob:
		field("modality", p.Modality)
		field("mime_type", p.MimeType)
		e.buf = append(e.buf, `,"content":`...)
		e.content(p.Content, false)
	case typeURI:
		field("modality", p.Modality)
		field("mime_type", p.MimeType)
		e.buf = append(e.buf, `,"uri":`...)
		e.content(p.URI, false)
	case typeFile:
		field("modality", p.Modality)
		field("mime_type", p.MimeType)
		field("file_id", p.FileID)
	}
	e.buf = append(e.buf, '}')
}

// content writes a content field: whole when it fits the limit, else cut
// to it and marked. With asJSON, a field that holds a JSON object or array
// is written as that value when it is whole (the conventions type
// arguments and responses as any value), and as a string otherwise.
func (e *encoder) content(b []byte, asJSON bool) {
	switch {
	case e.limit == skeleton:
		e.buf = append(e.buf, `""`...)
		return
	case asJSON && isJSONValue(b) && (e.limit == whole || len(b) <= e.limit):
		e.buf = append(e.buf, b...)
		return
	case e.limit == whole || encodedLen(b) <= e.limit:
		e.buf = appendString(e.buf, b)
		return
	}
	e.cut = true
	budget := e.limit - len(ellipsis)
	if budget < 0 {
		e.buf = append(e.buf, `""`...)
		return
	}
	e.buf = appendString(e.buf, b[:prefixLen(b, budget)])
	// The marker goes inside the closing quote.
	e.buf = append(e.buf[:len(e.buf)-1], ellipsis+`"`...)
}

// contentCost is what a content field adds to its skeleton's "" when it
// is written whole.
func contentCost(b []byte, asJSON bool) int {
	if asJSON && isJSONValue(b) {
		return len(b)
	}
	return encodedLen(b)
}

// cutCost is what a content field adds when the limit is limit.
func cutCost(cost, limit int) int {
	if cost <= limit {
		return cost
	}
	if limit < len(ellipsis) {
		return 0
	}
	return limit
}

// isJSONValue reports whether b is an object or array in valid JSON and
// valid UTF-8, which can be written as it is. Strings and numbers are
// written as strings: they read the same, and only structured values gain
// from being structured.
func isJSONValue(b []byte) bool {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	if i == len(b) || (b[i] != '{' && b[i] != '[') {
		return false
	}
	return utf8.Valid(b) && json.Valid(b)
}

// costs lists the content fields of parts, as contentCost measures them.
func costs(dst []int, ps []Part) []int {
	for i := range ps {
		p := &ps[i]
		switch p.Type {
		case typeText, typeReasoning, typeBlob:
			dst = append(dst, contentCost(p.Content, false))
		case typeToolCall:
			if len(p.Args) > 0 {
				dst = append(dst, contentCost(p.Args, true))
			}
		case typeToolCallResponse:
			dst = append(dst, contentCost(p.Response, true))
		case typeURI:
			dst = append(dst, contentCost(p.URI, false))
		}
	}
	return dst
}

// fitLimit is the largest per-field limit with which fields of the given
// costs add at most budget bytes to the skeleton: the longest fields are
// cut first, to a common length, and short ones stay whole.
func fitLimit(cs []int, budget int) int {
	slices.Sort(cs)
	total := func(limit int) int {
		n := 0
		for _, c := range cs {
			n += cutCost(c, limit)
		}
		return n
	}
	if len(cs) == 0 || total(cs[len(cs)-1]) <= budget {
		return whole
	}
	lo, hi := 0, cs[len(cs)-1]
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if total(mid) <= budget {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// encodeMessages writes msgs as at most max bytes of JSON. When even their
// shape does not fit, the oldest messages are left out (the conventions
// keep messages in the order they were sent, so what remains is still a
// conversation's end), and then the first parts of the one left.
func encodeMessages(msgs []Message, max int) Result {
	e := encoder{limit: whole}
	e.messages(msgs)
	if len(e.buf) <= max {
		return Result{JSON: string(e.buf)}
	}
	// Each message's shape is measured once, so that leaving messages
	// out costs time linear in their number.
	e = encoder{limit: skeleton}
	sizes := make([]int, len(msgs))
	for i := range msgs {
		n := len(e.buf)
		e.message(&msgs[i])
		sizes[i] = len(e.buf) - n
	}
	first, shape := leaveOut(sizes, max, true, 1)
	msgs = msgs[first:]
	if shape > max && len(msgs) == 1 {
		// One message whose parts alone are too many: its oldest parts
		// go, as the oldest messages did.
		m := msgs[0]
		ps := m.Parts
		m.Parts = nil
		e.buf = e.buf[:0]
		e.message(&m)
		bare := len(e.buf) // the message with "parts":[]
		sizes = partSizes(ps)
		var from int
		from, shape = leaveOut(sizes, max-bare, true, 0)
		shape += bare
		m.Parts = ps[from:]
		msgs = []Message{m}
	}
	if shape > max {
		return Result{JSON: "[]", Truncated: true}
	}
	var cs []int
	for i := range msgs {
		cs = costs(cs, msgs[i].Parts)
	}
	e = encoder{limit: fitLimit(cs, max-shape)}
	e.messages(msgs)
	return Result{JSON: string(e.buf), Truncated: true}
}

// encodeParts writes a list of parts (system instructions) as at most max
// bytes of JSON; when their shape does not fit, the last parts are left
// out, because instructions usually start with what matters most.
func encodeParts(ps []Part, max int) Result {
	e := encoder{limit: whole}
	e.parts(ps)
	if len(e.buf) <= max {
		return Result{JSON: string(e.buf)}
	}
	n, shape := leaveOut(partSizes(ps), max, false, 0)
	if shape > max {
		return Result{JSON: "[]", Truncated: true}
	}
	ps = ps[:n]
	e = encoder{limit: fitLimit(costs(nil, ps), max-shape)}
	e.parts(ps)
	return Result{JSON: string(e.buf), Truncated: true}
}

// partSizes measures the shape of each part.
func partSizes(ps []Part) []int {
	e := encoder{limit: skeleton}
	sizes := make([]int, len(ps))
	for i := range ps {
		n := len(e.buf)
		e.part(&ps[i])
		sizes[i] = len(e.buf) - n
	}
	return sizes
}

// leaveOut decides how many elements of a JSON array, whose elements'
// shapes have the given sizes, to leave out so that the array's shape fits
// max bytes: from the front (keep the last ones) or from the back, keeping
// at least keep of them. It returns, from the front, the index of the
// first element kept, else the number kept; and the shape's size, which
// still exceeds max when the elements kept do not fit.
func leaveOut(sizes []int, max int, fromFront bool, keep int) (n, shape int) {
	shape = 2 + max0(len(sizes)-1)
	for _, s := range sizes {
		shape += s
	}
	lo, hi := 0, len(sizes) // the elements kept are sizes[lo:hi]
	for shape > max && hi-lo > keep {
		var s int
		if fromFront {
			s = sizes[lo]
			lo++
		} else {
			hi--
			s = sizes[hi]
		}
		shape -= s
		if hi > lo {
			shape-- // its comma
		}
	}
	if fromFront {
		return lo, shape
	}
	return hi, shape
}

func max0(n int) int { return max(n, 0) }

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as encoding/json writes it, so that the value is valid for any
// exporter (protobuf strings must be UTF-8); control characters and the
// line separators JavaScript chokes on are escaped; <, > and & are not.
func appendString[T string | []byte](dst []byte, s T) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c >= 0x20:
				dst = append(dst, c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			continue
		}
		r, size := decodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = utf8.AppendRune(dst, utf8.RuneError)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

const hex = "0123456789abcdef"

func decodeRune[T string | []byte](s T) (rune, int) {
	if b, ok := any(s).([]byte); ok {
		return utf8.DecodeRune(b)
	}
	return utf8.DecodeRuneInString(string(s))
}

// charLen is the encoded length of the character that starts s and the
// number of bytes it takes in s, as appendString writes it.
func charLen[T string | []byte](s T) (enc, size int) {
	c := s[0]
	if c < utf8.RuneSelf {
		switch {
		case c == '"' || c == '\\', c == '\n', c == '\r', c == '\t':
			return 2, 1
		case c < 0x20:
			return 6, 1
		}
		return 1, 1
	}
	r, size := decodeRune(s)
	switch {
	case r == utf8.RuneError && size == 1:
		return len(string(utf8.RuneError)), 1
	case r == '\u2028', r == '\u2029':
		return 6, size
	}
	return size, size
}

// encodedLen is the length of s written by appendString, quotes left out.
func encodedLen[T string | []byte](s T) int {
	n := 0
	for i := 0; i < len(s); {
		enc, size := charLen(s[i:])
		n += enc
		i += size
	}
	return n
}

// prefixLen is the length of the longest prefix of s, cut between
// characters, whose encoding takes at most budget bytes.
func prefixLen[T string | []byte](s T, budget int) int {
	n := 0
	for i := 0; i < len(s); {
		enc, size := charLen(s[i:])
		if n+enc > budget {
			return i
		}
		n += enc
		i += size
	}
	return len(s)
}
