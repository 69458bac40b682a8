package meter

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A raw JSON reader for the dialects' hot path.
//
// gjson, which the dialects use for requests and whole bodies, decodes
// every string value it lands on, and a string with an escape in it (\n,
// \", \u00e9) is decoded into a new string: one allocation per such value,
// per event. Generated text is full of escapes, and a tool call's argument
// fragments are JSON inside a JSON string ({\"city\":), so on the per-event
// path a dialect reads with the functions below instead. They hand out
// values as they are written, slices of the event, and do not allocate
// (but for strconv's error on a malformed number, and a kept string longer
// than a rawBuf):
//
//   - rawMembers, rawMember, rawElements and rawValues walk objects and
//     arrays;
//   - rawText is a string's inside with its escapes kept, which is what
//     EstimateTokens reads;
//   - rawStr decodes a string that is kept (an id, a model, a finish
//     reason), into a buffer on the caller's stack, and only when it has
//     escapes: Observer copies what it keeps, so the decoded bytes need not
//     outlive the call;
//   - rawKindOf, rawInt, rawFloat and rawLooseInt read the rest the way
//     gjson did, so moving a dialect onto this reader changes nothing it
//     measures.
//
// The reader is lenient, as gjson is: it checks the structure it walks
// (strings closed, values separated, brackets balanced in number) and
// nothing inside a value until that value is read. Malformed input ends an
// iteration where it goes wrong, after the members before it were handed
// out; it never panics. Keys are compared as written, escapes and all: the
// keys dialects look for have none, and no encoder escapes them.

// rawKind is a raw JSON value's type, as its first byte says.
type rawKind uint8

const (
	kindInvalid rawKind = iota // empty, or a byte no JSON value starts with
	kindNull
	kindFalse
	kindTrue
	kindNumber
	kindString
	kindObject
	kindArray
)

// rawKindOf classifies a raw value by its first byte. Numbers are what
// gjson takes for one: also a leading + and Python's NaN and Infinity,
// which json.dumps writes for float values it cannot represent otherwise.
func rawKindOf(raw string) rawKind {
	if raw == "" {
		return kindInvalid
	}
	switch raw[0] {
	case '"':
		return kindString
	case '{':
		return kindObject
	case '[':
		return kindArray
	case 't':
		return kindTrue
	case 'f':
		return kindFalse
	case 'n':
		// "nan" is a number; "null" and any other n-word is null.
		if len(raw) > 1 && raw[1] != 'u' {
			return kindNumber
		}
		return kindNull
	case '+', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'i', 'I', 'N':
		return kindNumber
	}
	return kindInvalid
}

// rawMembers calls fn with the key (as written, without its quotes) and the
// raw value of each member of the JSON object obj, until fn returns false,
// the object ends, or it is malformed. Whitespace around values is not part
// of them. Duplicate keys are all handed out, in order.
func rawMembers(obj string, fn func(key, val string) bool) {
	i := rawSkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = rawSkipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return
		}
		end := rawStringEnd(obj, i)
		if end < 0 {
			return
		}
		key := obj[i+1 : end-1]
		i = rawSkipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = rawSkipSpace(obj, i+1)
		end = rawValueEnd(obj, i)
		if end < 0 || !fn(key, obj[i:end]) {
			return
		}
		i = rawSkipSpace(obj, end)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i++
	}
}

// rawMember is the raw value of the first member of obj named key, or ""
// when obj is not an object or has no such member: the member gjson's Get
// finds.
func rawMember(obj, key string) (val string) {
	rawMembers(obj, func(k, v string) bool {
		if k == key {
			val = v
			return false
		}
		return true
	})
	return val
}

// rawElements calls fn with each raw element of the JSON array arr, until
// fn returns false, the array ends, or it is malformed.
func rawElements(arr string, fn func(val string) bool) {
	i := rawSkipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	i++
	for {
		i = rawSkipSpace(arr, i)
		end := rawValueEnd(arr, i)
		if end < 0 || !fn(arr[i:end]) {
			return
		}
		i = rawSkipSpace(arr, end)
		if i >= len(arr) || arr[i] != ',' {
			return
		}
		i++
	}
}

// rawValues calls fn with each element of the JSON array v or, when v is an
// object, with each of its member values, as gjson's ForEach did where
// the dialects used it on a list: a PHP encoder writes an array whose
// indexes are not 0, 1, 2... as an object ({"1":{...}}), and the values are
// still the list.
func rawValues(v string, fn func(val string) bool) {
	if rawKindOf(v) == kindObject {
		rawMembers(v, func(_, val string) bool { return fn(val) })
		return
	}
	rawElements(v, fn)
}

// rawWalkMembers is rawMembers for a reader that descends into the values
// it wants as it meets them, so that a nested object is scanned once, not
// once to find its end and again to read it: on OpenAI's chat chunks that
// second pass over choices and delta was most of the reading. fn gets each
// key and the input from the value's first byte on, and returns the length
// of the value it read (rawValueAt gives a value it reads whole), or 0 or
// less to have the walker find the value's end itself, as rawMembers does:
// so a nested walk's -1 (a malformed value, read up to where it broke)
// leaves the outer walk going exactly where rawMembers would. It returns
// the length of the object, or -1 when it is malformed: like rawMembers it
// stops there, after handing out what came before.
func rawWalkMembers(obj string, fn func(key, rest string) int) int {
	i := rawSkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return -1
	}
	i = rawSkipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return i + 1
	}
	return rawWalkMembersFrom(obj, i, fn)
}

// rawKeyStart is the index of the opening quote of the key whose value
// starts at obj[valueStart], the key's raw bytes being keyLen long: the
// start of that member, where rawWalkMembersFrom may resume. It is -1 when
// obj does not have a key and colon there.
func rawKeyStart(obj string, valueStart, keyLen int) int {
	i := valueStart - 1
	for i >= 0 && isRawSpace(obj[i]) {
		i--
	}
	if i < 0 || obj[i] != ':' {
		return -1
	}
	i--
	for i >= 0 && isRawSpace(obj[i]) {
		i--
	}
	start := i - keyLen - 1
	if i < 0 || obj[i] != '"' || start < 0 || obj[start] != '"' {
		return -1
	}
	return start
}

// isRawSpace reports whether c is JSON whitespace.
func isRawSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// rawWalkMembersFrom is rawWalkMembers from obj[i] on, where a member's key
// starts (after the object's '{' or a ','): a reader that knows the members
// before i resumes the walk there.
func rawWalkMembersFrom(obj string, i int, fn func(key, rest string) int) int {
	for {
		if i >= len(obj) || obj[i] != '"' {
			return -1
		}
		end := rawStringEnd(obj, i)
		if end < 0 {
			return -1
		}
		key := obj[i+1 : end-1]
		i = rawSkipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return -1
		}
		i = rawSkipSpace(obj, i+1)
		if end = rawWalkValue(obj, i, fn(key, obj[i:])); end < 0 {
			return -1
		}
		i = rawSkipSpace(obj, end)
		if i >= len(obj) {
			return -1
		}
		switch obj[i] {
		case ',':
			i = rawSkipSpace(obj, i+1)
		case '}':
			return i + 1
		default:
			return -1
		}
	}
}

// rawWalkElements is rawElements as rawWalkMembers is rawMembers: fn gets
// the input from each element's first byte on and returns the element's
// length, or 0 or less to have it skipped; the result is the array's
// length, or -1 when it is malformed.
func rawWalkElements(arr string, fn func(rest string) int) int {
	i := rawSkipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return -1
	}
	i = rawSkipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return i + 1
	}
	for {
		end := rawWalkValue(arr, i, fn(arr[i:]))
		if end < 0 {
			return -1
		}
		i = rawSkipSpace(arr, end)
		if i >= len(arr) {
			return -1
		}
		switch arr[i] {
		case ',':
			i = rawSkipSpace(arr, i+1)
		case ']':
			return i + 1
		default:
			return -1
		}
	}
}

// rawWalkValues is rawValues for walkers: the elements of an array or the
// member values of an object (a PHP encoder's list).
func rawWalkValues(v string, fn func(rest string) int) int {
	if rawKindOf(v) == kindObject {
		return rawWalkMembers(v, func(_, rest string) int { return fn(rest) })
	}
	return rawWalkElements(v, fn)
}

// rawWalkValue is the end, in s, of the value at s[i] of which a walker's
// callback read n bytes: i+n, or where the value ends when it read none.
func rawWalkValue(s string, i, n int) int {
	if n <= 0 {
		return rawValueEnd(s, i)
	}
	return i + n
}

// rawValueAt is the raw value at the start of rest, for a walker's callback
// that reads a value whole, or "" when no value starts there.
func rawValueAt(rest string) string {
	end := rawValueEnd(rest, 0)
	if end < 0 {
		return ""
	}
	return rest[:end]
}

// rawLen is the number of elements of the JSON array arr, 0 for anything
// else.
func rawLen(arr string) (n int64) {
	rawElements(arr, func(string) bool {
		n++
		return true
	})
	return n
}

// rawText is the inside of a raw JSON string, escapes kept: what
// EstimateTokens reads. ok is false when raw is not a string.
func rawText(raw string) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	return raw[1 : len(raw)-1], true
}

// rawBuf is where rawStr decodes a string with escapes. Declared as a local
// variable of the caller, it lives on the stack, so decoding an id or a
// model (short, rarely escaped, "\/" at most) allocates nothing; a longer
// string grows into the heap, which is still correct.
type rawBuf [64]byte

// rawStr is the value of the raw JSON string raw, for a value that is kept
// (an id, a model, a finish reason, an error type): the inside as written
// when it has no escape, which is nearly always, else its decoding
// appended to buf, e.g. rawStr(v, b[:0]) with a local b of type rawBuf.
// The result aliases the event or buf: pass it to an Observer method,
// which copies what it keeps, and do not hold on to it. ok is false when
// raw is not a string.
func rawStr(raw string, buf []byte) (s []byte, ok bool) {
	in, ok := rawText(raw)
	if !ok {
		return nil, false
	}
	if strings.IndexByte(in, '\\') < 0 {
		return bytesOf(in), true
	}
	return rawUnescape(buf, in), true
}

// rawUnescape appends to dst the inside of a JSON string, in, with its
// escapes decoded as encoding/json decodes them: a surrogate pair becomes
// its character, a lone surrogate U+FFFD. Unlike encoding/json it does not
// check the rest: an escape that is not one (\x, a short \u) is kept as
// written, and other bytes, even invalid UTF-8 or control characters, are
// copied unchanged, as they are when there is no escape to decode at all.
func rawUnescape(dst []byte, in string) []byte {
	for {
		i := strings.IndexByte(in, '\\')
		if i < 0 {
			return append(dst, in...)
		}
		dst = append(dst, in[:i]...)
		in = in[i:]
		if len(in) < 2 {
			return append(dst, in...)
		}
		n := 2 // the length of the escape consumed
		switch in[1] {
		case '"', '\\', '/':
			dst = append(dst, in[1])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := rawHex4(in[2:])
			if !ok {
				dst = append(dst, in[:2]...)
				break
			}
			n = 6
			if r >= 0xD800 && r < 0xDC00 && len(in) >= 12 && in[6] == '\\' && in[7] == 'u' {
				if r2, ok := rawHex4(in[8:]); ok && r2 >= 0xDC00 && r2 < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
					n = 12
				}
			}
			// A surrogate left unpaired is encoded as U+FFFD.
			dst = utf8.AppendRune(dst, r)
		default:
			dst = append(dst, in[:2]...)
		}
		in = in[n:]
	}
}

// rawHex4 reads the four hex digits of a \u escape.
func rawHex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[:4]) {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// rawFloat is the value of a raw JSON number; ok is false when raw is not a
// number. A number strconv cannot parse reads as 0, as gjson reads it.
func rawFloat(raw string) (f float64, ok bool) {
	if rawKindOf(raw) != kindNumber {
		return 0, false
	}
	// The error, which allocates, comes only with a malformed number.
	f, _ = strconv.ParseFloat(raw, 64)
	return f, true
}

// rawInt is the integer value of a raw JSON number, computed as gjson's
// Result.Int does (a fraction is truncated; an integer beyond 2^53 is
// parsed exactly; beyond int64, saturated); ok is false when raw is not a
// number.
func rawInt(raw string) (n int64, ok bool) {
	f, ok := rawFloat(raw)
	if !ok {
		return 0, false
	}
	const maxSafe = 1<<53 - 1
	if !(f < -maxSafe || f > maxSafe) {
		return int64(f), true
	}
	if n, ok := rawParseInt(raw); ok {
		return n, true
	}
	return rawF2I(f), true
}

// rawLooseInt is gjson's Result.Int for any raw value: a number as rawInt
// reads it, a string holding one likewise, true as 1 and anything else
// (null included) as 0. It is for counts the replaced code read without
// checking their type, so that nothing it measured changes.
func rawLooseInt(raw string) int64 {
	switch rawKindOf(raw) {
	case kindNumber:
		n, _ := rawInt(raw)
		return n
	case kindTrue:
		return 1
	case kindString:
		var b rawBuf
		s, _ := rawStr(raw, b[:0])
		if n, ok := rawParseInt(view(s)); ok {
			return n
		}
		// strconv's error allocates; most strings cannot be a float,
		// which a first byte that starts none of its syntaxes says.
		if len(s) > 0 && strings.IndexByte("+-.0123456789iInN", s[0]) >= 0 {
			if f, err := strconv.ParseFloat(view(s), 64); err == nil {
				return rawF2I(f)
			}
		}
	}
	return 0
}

// rawParseInt parses an optionally negative run of decimal digits,
// saturating at the bounds of int64.
func rawParseInt(s string) (int64, bool) {
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	if s == "" {
		return 0, false
	}
	var u uint64
	over := false
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
		if u > (math.MaxUint64-9)/10 {
			over = true
			continue
		}
		u = u*10 + uint64(c-'0')
	}
	switch {
	case neg && (over || u > 1<<63):
		return math.MinInt64, true
	case neg:
		return -int64(u), true
	case over || u > math.MaxInt64:
		return math.MaxInt64, true
	}
	return int64(u), true
}

// rawF2I converts a float to int64, saturating.
func rawF2I(f float64) int64 {
	switch {
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f < math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}

// rawCount reads a raw JSON number as a token count: negative values and
// anything but a number are not counts.
func rawCount(raw string) (int64, bool) {
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' {
		return 0, false
	}
	return rawInt(raw)
}

// rawScalarStop marks the bytes that end a scalar: control characters
// and space, the delimiters, and the first bytes of strings, objects and
// arrays.
var rawScalarStop = func() (stop [256]bool) {
	for c := 0; c <= ' '; c++ {
		stop[c] = true
	}
	for _, c := range []byte(`,:}]"{[`) {
		stop[c] = true
	}
	return stop
}()

func rawSkipSpace(s string, i int) int {
	for i < len(s) && isRawSpace(s[i]) {
		i++
	}
	return i
}

// rawStringEnd is the index just past the string whose opening quote is
// s[i], or -1 when it is not closed. Most strings are keys and short
// values, which a plain loop finishes soonest; past the first bytes, a long
// text is searched for quotes with IndexByte, a quote closing the string
// unless an odd number of backslashes precedes it.
func rawStringEnd(s string, i int) int {
	j := i + 1
	for end := min(len(s), j+16); j < end; j++ {
		switch s[j] {
		case '"':
			return j + 1
		case '\\':
			j++
		}
	}
	// s[j] is not the second byte of an escape, so only backslashes from
	// start on count.
	start := j
	for j < len(s) {
		q := strings.IndexByte(s[j:], '"')
		if q < 0 {
			return -1
		}
		j += q
		k := j
		for k > start && s[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j + 1
		}
		j++
	}
	return -1
}

// rawValueEnd is the index just past the JSON value that starts at s[i],
// or -1 when there is none there or it does not end. Inside objects and
// arrays only strings are skipped and brackets counted, not matched: what
// is inside is checked when, and if, it is read.
func rawValueEnd(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	switch s[i] {
	case '"':
		return rawStringEnd(s, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				// Inside a container the strings are mostly keys and
				// short values: a loop here beats a call per string.
				for j++; j < len(s) && s[j] != '"'; j++ {
					if s[j] == '\\' {
						j++
					}
				}
				if j >= len(s) {
					return -1
				}
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	// A scalar (a number or a literal, never checked here) runs to the
	// next whitespace, delimiter or start of another value: what counts
	// brackets above and what walks members (rawWalkMembers) must see the
	// same values, and a scalar that ran into a quote or a bracket would
	// hide from the walk what the counting reads.
	j := i
	for j < len(s) && !rawScalarStop[s[j]] {
		j++
	}
	if j == i {
		return -1
	}
	return j
}
