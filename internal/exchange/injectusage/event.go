package injectusage

import (
	"bytes"
	"unsafe"

	"github.com/tidwall/gjson"
)

// appendClientEvent appends what the client gets for one complete raw
// event: nothing for the usage-only chunk, the event without its
// "usage":null member otherwise, and the event as it came for anything it
// does not recognise, since only what include_usage added may go.
func appendClientEvent(dst, ev []byte) []byte {
	data, off := singleDataLine(ev)
	if data == nil || data[0] != '{' {
		return append(dst, ev...)
	}
	s := view(data)
	usage := gjson.Get(s, "usage")
	if usage.IsObject() {
		if isEmptyArray(gjson.Get(s, "choices")) {
			return dst
		}
		return append(dst, ev...)
	}
	if usage.Type != gjson.Null || usage.Index == 0 {
		return append(dst, ev...)
	}
	start, end := memberSpan(data, usage.Index, usage.Index+len(usage.Raw))
	if start < 0 {
		return append(dst, ev...)
	}
	dst = append(dst, ev[:off+start]...)
	return append(dst, ev[off+end:]...)
}

// isEmptyArray reports whether r is an array with no element: the first
// byte after its bracket says so, with no need to walk it.
func isEmptyArray(r gjson.Result) bool {
	if !r.IsArray() {
		return false
	}
	raw := r.Raw[1:]
	for len(raw) > 0 && isSpace(raw[0]) {
		raw = raw[1:]
	}
	return len(raw) > 0 && raw[0] == ']'
}

// view reads b as a string without copying, for gjson; nothing read from it
// outlives the event.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// singleDataLine returns the JSON of an event made of one `data:` line and
// its offset in ev; nil for anything else (comments, several lines, other
// fields), which then passes as it came. The JSON of an OpenAI chunk is
// always one line.
func singleDataLine(ev []byte) ([]byte, int) {
	line := bytes.TrimRight(ev, "\r\n")
	if bytes.ContainsAny(line, "\r\n") || !bytes.HasPrefix(line, []byte("data:")) {
		return nil, 0
	}
	off := len("data:")
	if len(line) > off && line[off] == ' ' {
		off++
	}
	if off >= len(line) {
		return nil, 0
	}
	return line[off:], off
}

// memberSpan finds the bytes of the object member whose value spans
// [valStart, valEnd) in data, with the comma that separates it from its
// neighbour, so removing them leaves valid JSON; -1, -1 when the bytes
// before the value are not a key and a colon.
func memberSpan(data []byte, valStart, valEnd int) (int, int) {
	i := valStart - 1
	for i >= 0 && isSpace(data[i]) {
		i--
	}
	if i < 0 || data[i] != ':' {
		return -1, -1
	}
	i--
	for i >= 0 && isSpace(data[i]) {
		i--
	}
	if i < 0 || data[i] != '"' {
		return -1, -1
	}
	keyStart := bytes.LastIndexByte(data[:i], '"')
	if keyStart < 0 {
		return -1, -1
	}
	before := keyStart - 1
	for before >= 0 && isSpace(data[before]) {
		before--
	}
	if before >= 0 && data[before] == ',' {
		return before, valEnd
	}
	after := valEnd
	for after < len(data) && isSpace(data[after]) {
		after++
	}
	if after < len(data) && data[after] == ',' {
		return keyStart, after + 1
	}
	return keyStart, valEnd
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
