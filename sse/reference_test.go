package sse

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/splitfeed"
)

// This file holds a deliberately naive reference decoder: it sees the whole
// stream at once, splits it into lines first, and then transcribes the
// WHATWG "Server-sent events" interpretation steps one by one, using strings
// and no cleverness. It shares no code with the real Decoder so that the
// differential tests compare two independent readings of the spec (plus the
// package's documented extensions: Close leniency, the size cap, Stats).

// rec is a deep copy of an Event, comparable with ==, so that tests can
// record events that are only valid during the callback.
type rec struct {
	Type         string
	Data         string
	ID           string
	Retry        int64
	Unterminated bool
	// Comment marks a comment line handed to OnComment, held in Data.
	Comment bool
}

// refDecode decodes a complete stream the slow, obvious way. maxEvent <= 0
// means DefaultMaxEventSize.
func refDecode(input []byte, maxEvent int) ([]rec, Stats) {
	return refDecodeAll(input, maxEvent, false)
}

// refDecodeAll is refDecode that, with notes, also records every comment line
// no longer than the cap, in stream order, as OnComment hands them out.
func refDecodeAll(input []byte, maxEvent int, notes bool) ([]rec, Stats) {
	if maxEvent <= 0 {
		maxEvent = DefaultMaxEventSize
	}
	stats := Stats{Bytes: int64(len(input))}
	s := string(input)

	// One leading BOM is dropped.
	s = strings.TrimPrefix(s, "\uFEFF")

	// Split into lines. CRLF, LF and CR each end a line. A last line with no
	// line end is kept separately: the spec would discard it, Close keeps it.
	var lines []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\r':
			lines = append(lines, cur.String())
			cur.Reset()
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
		case '\n':
			lines = append(lines, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(s[i])
		}
	}
	tail := cur.String()

	var (
		events     []rec
		data       string
		eventType  string
		lastID     string
		retry      int64 = -1
		size       int
		discarding bool
	)
	clearEvent := func() {
		data = ""
		eventType = ""
		retry = -1
		size = 0
		discarding = false
	}
	dispatch := func(unterminated bool) {
		if data == "" {
			clearEvent()
			return
		}
		data = strings.TrimSuffix(data, "\n")
		events = append(events, rec{Type: eventType, Data: data, ID: lastID, Retry: retry, Unterminated: unterminated})
		stats.Events++
		clearEvent()
	}
	process := func(line string) {
		if line == "" {
			if discarding {
				clearEvent()
			} else {
				dispatch(false)
			}
			return
		}
		if strings.HasPrefix(line, ":") {
			stats.Comments++
			if notes && len(line) <= maxEvent {
				events = append(events, rec{Data: line, Comment: true})
			}
			return
		}
		if discarding {
			return
		}
		size += len(line)
		if size > maxEvent {
			stats.Oversized++
			clearEvent()
			discarding = true
			return
		}
		name, value := line, ""
		if i := strings.Index(line, ":"); i >= 0 {
			name = line[:i]
			value = line[i+1:]
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "event":
			eventType = value
		case "data":
			data += value + "\n"
		case "id":
			if !strings.Contains(value, "\x00") {
				lastID = value
			}
		case "retry":
			if value != "" && strings.Trim(value, "0123456789") == "" {
				n, err := strconv.ParseInt(value, 10, 64)
				if err != nil {
					n = math.MaxInt64 // only a range error is possible here
				}
				retry = n
			}
		}
	}
	for _, line := range lines {
		process(line)
	}
	if tail != "" {
		process(tail)
	}
	if !discarding {
		dispatch(true)
	}
	return events, stats
}

// String makes failure messages readable (quoted, so CR, LF and NUL show).
func (r rec) String() string {
	s := "{type=" + strconv.Quote(r.Type) + " data=" + strconv.Quote(r.Data) + " id=" + strconv.Quote(r.ID)
	if r.Retry != -1 {
		s += " retry=" + strconv.FormatInt(r.Retry, 10)
	}
	if r.Unterminated {
		s += " unterminated"
	}
	return s + "}"
}

// genStream builds a random stream from the pieces real and broken servers
// produce: every field kind, valid and invalid values, comments, blank lines,
// all three line ends, BOMs in and out of place, stray CR/LF/NUL/colon bytes,
// long lines, and sometimes no line end at the very end.
func genStream(r *rand.Rand) []byte {
	var b []byte
	switch r.IntN(6) {
	case 0:
		b = append(b, "\uFEFF"...)
	case 1:
		b = append(b, "\uFEFF\uFEFF"...)
	case 2:
		b = append(b, "\uFEFF"[:1+r.IntN(2)]...)
	}
	alphabet := []string{"a", "b", " ", ":", "\x00", "\xEF", "\xBB", "\xBF", "{", "\"", "0", "9", "é", "\r", "\n"}
	value := func() string {
		var v strings.Builder
		n := r.IntN(12)
		if r.IntN(20) == 0 {
			n = r.IntN(300)
		}
		for range n {
			c := alphabet[r.IntN(len(alphabet))]
			if (c == "\r" || c == "\n") && r.IntN(4) != 0 {
				c = "x" // stray line ends are rarer than letters
			}
			v.WriteString(c)
		}
		return v.String()
	}
	digits := func() string {
		if r.IntN(10) == 0 {
			return "99999999999999999999999"
		}
		return strconv.Itoa(r.IntN(100000))
	}
	ends := []string{"\n", "\r", "\r\n"}
	lines := r.IntN(40)
	for i := 0; i < lines; i++ {
		var line string
		switch r.IntN(16) {
		case 0, 1, 2:
			line = "data: " + value()
		case 3:
			line = "data:" + value()
		case 4:
			line = []string{"data", "data:", "data: ", "data:  "}[r.IntN(4)]
		case 5:
			line = "event: " + value()
		case 6:
			line = "id: " + value()
		case 7:
			line = "retry: " + digits()
		case 8:
			line = "retry:" + value()
		case 9:
			line = ":" + value()
		case 10:
			line = []string{": keep-alive", ": OPENROUTER PROCESSING", ":"}[r.IntN(3)]
		case 11:
			line = []string{"Data: x", "foo: bar", "id", "event", "retry", "dat", "datax: y", "\uFEFFdata: bom"}[r.IntN(8)]
		case 12:
			line = value()
		default:
			line = "" // blank line: dispatch
		}
		b = append(b, line...)
		if i == lines-1 && r.IntN(3) == 0 {
			break // stream ends without a line end
		}
		b = append(b, ends[r.IntN(len(ends))]...)
	}
	return b
}

// genMax picks an event cap: mostly the default, often small enough that
// generated events cross it.
func genMax(r *rand.Rand) int {
	switch r.IntN(4) {
	case 0:
		return 0
	case 1:
		return 1 + r.IntN(8)
	default:
		return 1 + r.IntN(80)
	}
}

func TestReferenceAgreesOnFixtures(t *testing.T) {
	for name, in := range loadFixtures(t) {
		for _, maxEvent := range []int{0, 1, 16, 64, 300} {
			want, wantSt := refDecode(in, maxEvent)
			got, st := decodeChunks([][]byte{in}, maxEvent)
			if !reflect.DeepEqual(got, want) || st != wantSt {
				t.Errorf("%s max=%d:\n got %q %+v\nwant %q %+v", name, maxEvent, got, st, want, wantSt)
			}
		}
	}
}

func TestReferenceAgreesOnRandomStreams(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	r := rand.New(rand.NewPCG(7, 11))
	for i := 0; i < n; i++ {
		in := genStream(r)
		maxEvent := genMax(r)
		want, wantSt := refDecode(in, maxEvent)
		for _, chunks := range [][][]byte{{in}, splitfeed.Random(r, in), splitfeed.Bytewise(in)} {
			got, st := decodeChunks(chunks, maxEvent)
			if !reflect.DeepEqual(got, want) || st != wantSt {
				t.Fatalf("stream %d, max=%d, %d chunks, input %q:\n got %q %+v\nwant %q %+v",
					i, maxEvent, len(chunks), in, got, st, want, wantSt)
			}
		}
		// With OnComment set, the comments come out in order with the
		// events, and the events are the same.
		want, wantSt = refDecodeAll(in, maxEvent, true)
		for _, chunks := range [][][]byte{{in}, splitfeed.Random(r, in), splitfeed.Bytewise(in)} {
			got, st := decodeChunksNotes(chunks, maxEvent)
			if !reflect.DeepEqual(got, want) || st != wantSt {
				t.Fatalf("with comments: stream %d, max=%d, %d chunks, input %q:\n got %q %+v\nwant %q %+v",
					i, maxEvent, len(chunks), in, got, st, want, wantSt)
			}
		}
	}
}
