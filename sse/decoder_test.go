package sse

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/splitfeed"
)

// decodeChunks runs the real Decoder over chunks, then Close, and returns
// deep copies of the events and the final Stats. splitfeed.Feed overwrites
// each chunk after its Write, as a proxy reuses its buffer, so a decoder
// that kept a reference to one would fail the comparison with an unsplit
// run.
func decodeChunks(chunks [][]byte, maxEvent int) ([]rec, Stats) {
	var got []rec
	d := &Decoder{MaxEventSize: maxEvent}
	d.OnEvent = func(e *Event) {
		got = append(got, rec{
			Type:         string(e.Type),
			Data:         string(e.Data),
			ID:           string(e.ID),
			Retry:        e.Retry,
			Unterminated: e.Unterminated,
		})
	}
	splitfeed.Feed(d, chunks)
	return got, d.Stats()
}

// decodeChunksNotes is decodeChunks with OnComment set: comment lines are
// recorded among the events, in stream order.
func decodeChunksNotes(chunks [][]byte, maxEvent int) ([]rec, Stats) {
	var got []rec
	d := &Decoder{MaxEventSize: maxEvent}
	d.OnEvent = func(e *Event) {
		got = append(got, rec{Type: string(e.Type), Data: string(e.Data), ID: string(e.ID), Retry: e.Retry, Unterminated: e.Unterminated})
	}
	d.OnComment = func(line []byte) { got = append(got, rec{Data: string(line), Comment: true}) }
	splitfeed.Feed(d, chunks)
	return got, d.Stats()
}

func strs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// ev builds an expected terminated event with no retry.
func ev(typ, data, id string) rec {
	return rec{Type: typ, Data: data, ID: id, Retry: -1}
}

func loadFixtures(t testing.TB) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.sse"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatal("no fixtures in testdata")
	}
	m := make(map[string][]byte, len(paths))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		m[filepath.Base(p)] = b
	}
	return m
}

func TestDecoderCases(t *testing.T) {
	const maxInt = math.MaxInt64
	type counts struct{ events, oversized, comments int64 }
	tests := []struct {
		name   string
		chunks []string
		max    int
		want   []rec
		stats  *counts // nil: not checked beyond the events
	}{
		{
			name:   "single event",
			chunks: []string{"data: hello\n\n"},
			want:   []rec{ev("", "hello", "")},
		},
		{
			name:   "several events in one write",
			chunks: []string{"data: a\n\ndata: b\n\nevent: t\ndata: c\n\n"},
			want:   []rec{ev("", "a", ""), ev("", "b", ""), ev("t", "c", "")},
		},
		{
			name:   "event split inside field name and value",
			chunks: []string{"da", "ta", ": h", "ello\n", "\n"},
			want:   []rec{ev("", "hello", "")},
		},
		{
			name:   "CRLF split across writes is one line end",
			chunks: []string{"data: a\r", "\ndata: b\r\n\r", "\n"},
			want:   []rec{ev("", "a\nb", "")},
		},
		{
			name:   "CR at end of write then LF blank line",
			chunks: []string{"data: a\r", "\n\n"},
			want:   []rec{ev("", "a", "")},
		},
		{
			name:   "CR at end of write then CR blank line",
			chunks: []string{"data: a\r", "\r"},
			want:   []rec{ev("", "a", "")},
		},
		{
			name:   "CR then empty write then LF",
			chunks: []string{"data: a\r", "", "\n", "\r\n"},
			want:   []rec{ev("", "a", "")},
		},
		{
			name:   "lone CR framing",
			chunks: []string{"data: a\r\rdata: b\r\r"},
			want:   []rec{ev("", "a", ""), ev("", "b", "")},
		},
		{
			name:   "LF CR is two line ends",
			chunks: []string{"data: a\n\rdata: b\n\n"},
			want:   []rec{ev("", "a", ""), ev("", "b", "")},
		},
		{
			name:   "CRLF framing",
			chunks: []string{"data: a\r\ndata: b\r\n\r\n"},
			want:   []rec{ev("", "a\nb", "")},
		},
		{
			name:   "lone CR at end of stream ends the line",
			chunks: []string{"data: x\r"},
			want:   []rec{{Data: "x", Retry: -1, Unterminated: true}},
		},
		{
			name:   "BOM skipped",
			chunks: []string{"\xEF\xBB\xBFdata: a\n\n"},
			want:   []rec{ev("", "a", "")},
		},
		{
			name:   "BOM split across writes",
			chunks: []string{"\xEF", "\xBB", "\xBFdata: a\n\n"},
			want:   []rec{ev("", "a", "")},
		},
		{
			name:   "BOM split 1|2",
			chunks: []string{"\xEF", "\xBB\xBF", "data: a\n\n"},
			want:   []rec{ev("", "a", "")},
		},
		{
			name:   "only one BOM is skipped",
			chunks: []string{"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n"},
			want:   []rec{ev("", "b", "")},
		},
		{
			name:   "BOM not at start is content",
			chunks: []string{"data: a\n\n\xEF\xBB\xBFdata: b\n\n"},
			want:   []rec{ev("", "a", "")},
		},
		{
			name:   "partial BOM is content",
			chunks: []string{"\xEF\xBB", "data: a\n\ndata: b\n\n"},
			want:   []rec{ev("", "b", "")},
		},
		{
			name:   "partial BOM then colon makes a field, not a comment",
			chunks: []string{"\xEF", ":x\n\n"},
			want:   nil,
			stats:  &counts{0, 0, 0},
		},
		{
			name:   "partial BOM alone at end of stream",
			chunks: []string{"\xEF\xBB"},
			want:   nil,
		},
		{
			name:   "BOM then comment",
			chunks: []string{"\xEF\xBB\xBF", ": hi\n", "data: a\n\n"},
			want:   []rec{ev("", "a", "")},
			stats:  &counts{1, 0, 1},
		},
		{
			name:   "data with two spaces keeps one",
			chunks: []string{"data:  x\n\n"},
			want:   []rec{ev("", " x", "")},
		},
		{
			name:   "data without space",
			chunks: []string{"data:x\n\n"},
			want:   []rec{ev("", "x", "")},
		},
		{
			name:   "colon in value",
			chunks: []string{"data: {\"a\":1}\n\n"},
			want:   []rec{ev("", `{"a":1}`, "")},
		},
		{
			name:   "field without colon gives empty data",
			chunks: []string{"data\n\n"},
			want:   []rec{ev("", "", "")},
		},
		{
			name:   "two empty data lines join to newline",
			chunks: []string{"data\ndata\n\n"},
			want:   []rec{ev("", "\n", "")},
		},
		{
			name:   "two data: lines join to newline",
			chunks: []string{"data:\ndata:\n\n"},
			want:   []rec{ev("", "\n", "")},
		},
		{
			name:   "empty then value",
			chunks: []string{"data\ndata: x\n\n"},
			want:   []rec{ev("", "\nx", "")},
		},
		{
			name:   "multi-line data",
			chunks: []string{"data: a\ndata: b\ndata: c\n\n"},
			want:   []rec{ev("", "a\nb\nc", "")},
		},
		{
			name:   "data line split from the next one",
			chunks: []string{"data: a\n", "data: b\n\n"},
			want:   []rec{ev("", "a\nb", "")},
		},
		{
			name:   "event type applies to one event",
			chunks: []string{"event: foo\ndata: a\n\ndata: b\n\n"},
			want:   []rec{ev("foo", "a", ""), ev("", "b", "")},
		},
		{
			name:   "last event field wins",
			chunks: []string{"event: a\nevent: b\ndata: x\n\n"},
			want:   []rec{ev("b", "x", "")},
		},
		{
			name:   "event without data dispatches nothing and resets type",
			chunks: []string{"event: foo\n\ndata: b\n\n"},
			want:   []rec{ev("", "b", "")},
			stats:  &counts{1, 0, 0},
		},
		{
			name:   "comment ignored and counted",
			chunks: []string{": keep-alive\ndata: a\n:\n\n"},
			want:   []rec{ev("", "a", "")},
			stats:  &counts{1, 0, 2},
		},
		{
			name:   "comment split across writes",
			chunks: []string{": OPENROUTER", " PROCESSING", "\n\n", "data: a\n\n"},
			want:   []rec{ev("", "a", "")},
			stats:  &counts{1, 0, 1},
		},
		{
			name:   "field names are case-sensitive",
			chunks: []string{"Data: a\nDATA: b\n\n"},
			want:   nil,
		},
		{
			name:   "unknown field ignored",
			chunks: []string{"foo: bar\ndata: a\n\n"},
			want:   []rec{ev("", "a", "")},
		},
		{
			name:   "id persists across events and can be cleared",
			chunks: []string{"id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n"},
			want:   []rec{ev("", "a", "1"), ev("", "b", "1"), ev("", "c", "")},
		},
		{
			name:   "id with NUL ignored",
			chunks: []string{"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n"},
			want:   []rec{ev("", "a", "1"), ev("", "b", "1")},
		},
		{
			name:   "id set in an event without data persists",
			chunks: []string{"id: 9\n\ndata: a\n\n"},
			want:   []rec{ev("", "a", "9")},
		},
		{
			name:   "retry recorded for its event only",
			chunks: []string{"retry: 100\ndata: a\n\ndata: b\n\n"},
			want:   []rec{{Data: "a", Retry: 100}, ev("", "b", "")},
		},
		{
			name:   "retry with non-digits ignored",
			chunks: []string{"retry: 1a\ndata: x\n\nretry: -5\ndata: y\n\nretry: 1 \ndata: z\n\n"},
			want:   []rec{ev("", "x", ""), ev("", "y", ""), ev("", "z", "")},
		},
		{
			name:   "empty retry ignored",
			chunks: []string{"retry:\ndata: x\n\nretry\ndata: y\n\n"},
			want:   []rec{ev("", "x", ""), ev("", "y", "")},
		},
		{
			name:   "invalid retry keeps earlier valid one",
			chunks: []string{"retry: 5\nretry: x\ndata: x\n\n"},
			want:   []rec{{Data: "x", Retry: 5}},
		},
		{
			name:   "huge retry saturates",
			chunks: []string{"retry: 99999999999999999999\ndata: x\n\n"},
			want:   []rec{{Data: "x", Retry: maxInt}},
		},
		{
			name:   "retry of exactly MaxInt64",
			chunks: []string{"retry: 9223372036854775807\ndata: x\n\n"},
			want:   []rec{{Data: "x", Retry: maxInt}},
		},
		{
			name:   "retry on a data-less event is dropped",
			chunks: []string{"retry: 7\n\ndata: x\n\n"},
			want:   []rec{ev("", "x", "")},
		},
		{
			name:   "blank lines alone dispatch nothing",
			chunks: []string{"\n\n\r\n\r"},
			want:   nil,
		},
		{
			name:   "unterminated event at end of stream",
			chunks: []string{"data: a\n\ndata: [DONE]\n"},
			want:   []rec{ev("", "a", ""), {Data: "[DONE]", Retry: -1, Unterminated: true}},
		},
		{
			name:   "last line without line end",
			chunks: []string{"data: a\n\ndata: [DO", "NE]"},
			want:   []rec{ev("", "a", ""), {Data: "[DONE]", Retry: -1, Unterminated: true}},
		},
		{
			name:   "unterminated event keeps its type and id",
			chunks: []string{"id: 4\nevent: done\ndata: x"},
			want:   []rec{{Type: "done", Data: "x", ID: "4", Retry: -1, Unterminated: true}},
		},
		{
			name:   "pending event line at end dispatches nothing",
			chunks: []string{"data: a\n\nevent: x"},
			want:   []rec{ev("", "a", "")},
		},
		{
			name:   "comment at end without line end",
			chunks: []string{": bye"},
			want:   nil,
			stats:  &counts{0, 0, 1},
		},
		{
			name:   "oversize event skipped and next decoded",
			chunks: []string{"data: 0123456789abcdef\n\ndata: ok\n\n"},
			max:    16,
			want:   []rec{ev("", "ok", "")},
			stats:  &counts{1, 1, 0},
		},
		{
			name:   "oversize across several lines",
			chunks: []string{"data: 0123456\ndata: 789abc\ndata: x\n\ndata: ok\n\n"},
			max:    16,
			want:   []rec{ev("", "ok", "")},
			stats:  &counts{1, 1, 0},
		},
		{
			name:   "oversize single long line split across writes",
			chunks: []string{"data: 0123", "456789abcdef", "ghijk", "lmnop\n", "\n", "data: ok\n\n"},
			max:    16,
			want:   []rec{ev("", "ok", "")},
			stats:  &counts{1, 1, 0},
		},
		{
			name:   "oversize event ignores its later fields",
			chunks: []string{"data: 0123456789abcdef\nid: x\nevent: y\ndata: z\n\ndata: ok\n\n"},
			max:    16,
			want:   []rec{ev("", "ok", "")},
		},
		{
			name:   "fields before the overflow still apply to id",
			chunks: []string{"id: 5\ndata: 0123456789abcdef\n\ndata: ok\n\n"},
			max:    16,
			want:   []rec{ev("", "ok", "5")},
		},
		{
			name:   "oversize counted once",
			chunks: []string{"data: 0123456789\ndata: 0123456789\ndata: 0123456789\n\n"},
			max:    16,
			want:   nil,
			stats:  &counts{0, 1, 0},
		},
		{
			name:   "comments inside an oversized event are counted",
			chunks: []string{"data: 0123456789abcdef\n: ka\n\ndata: ok\n\n"},
			max:    16,
			want:   []rec{ev("", "ok", "")},
			stats:  &counts{1, 1, 1},
		},
		{
			name:   "comments do not count towards the size",
			chunks: []string{": a very long keep-alive comment line\ndata: ok\n\n"},
			max:    16,
			want:   []rec{ev("", "ok", "")},
			stats:  &counts{1, 0, 1},
		},
		{
			name:   "line of exactly the cap fits",
			chunks: []string{"data: a\n\n"},
			max:    7,
			want:   []rec{ev("", "a", "")},
		},
		{
			name:   "line one over the cap",
			chunks: []string{"data: a\n\ndata: b\n\n"},
			max:    6,
			want:   nil,
			stats:  &counts{0, 2, 0},
		},
		{
			name:   "oversize at end of stream is not dispatched",
			chunks: []string{"data: 0123456789"},
			max:    8,
			want:   nil,
			stats:  &counts{0, 1, 0},
		},
		{
			name:   "oversize discards until blank line split by CRLF",
			chunks: []string{"data: 0123456789abcdef\r", "\n\r", "\ndata: ok\r\n\r\n"},
			max:    16,
			want:   []rec{ev("", "ok", "")},
		},
		{
			name:   "cap resets per event",
			chunks: []string{"data: 0123456789\n\ndata: 0123456789\n\n"},
			max:    16,
			want:   []rec{ev("", "0123456789", ""), ev("", "0123456789", "")},
		},
		{
			name:   "negative MaxEventSize means default",
			chunks: []string{"data: 0123456789abcdef\n\n"},
			max:    -1,
			want:   []rec{ev("", "0123456789abcdef", "")},
		},
		{
			name:   "NUL and high bytes pass through",
			chunks: []string{"data: \x00\xff\xfe\n\n"},
			want:   []rec{ev("", "\x00\xff\xfe", "")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chunks := strs(tc.chunks...)
			got, st := decodeChunks(chunks, tc.max)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("events:\n got %q\nwant %q", got, tc.want)
			}
			whole := bytes.Join(chunks, nil)
			if st.Bytes != int64(len(whole)) {
				t.Errorf("Stats.Bytes = %d, want %d", st.Bytes, len(whole))
			}
			if tc.stats != nil {
				gc := counts{st.Events, st.Oversized, st.Comments}
				if gc != *tc.stats {
					t.Errorf("stats = %+v, want %+v", gc, *tc.stats)
				}
			}
			// The same input must decode the same however it is split, and
			// the reference decoder must agree (this also checks the
			// reference against the hand-written expectations).
			checkSplits(t, whole, tc.max, got, st)
			refEv, refSt := refDecode(whole, tc.max)
			if !reflect.DeepEqual(refEv, tc.want) || refSt != st {
				t.Errorf("reference disagrees:\n ref %q %+v\nwant %q %+v", refEv, refSt, tc.want, st)
			}
		})
	}
}

// checkSplits asserts that whole decodes to want (events and stats) fed in
// one write, byte by byte, and at every single split point.
func checkSplits(t *testing.T, whole []byte, maxEvent int, want []rec, wantSt Stats) {
	t.Helper()
	check := func(how string, chunks [][]byte) {
		t.Helper()
		got, st := decodeChunks(chunks, maxEvent)
		if !reflect.DeepEqual(got, want) || st != wantSt {
			t.Fatalf("%s:\n got %q %+v\nwant %q %+v", how, got, st, want, wantSt)
		}
	}
	check("whole", [][]byte{whole})
	check("byte by byte", splitfeed.Bytewise(whole))
	for i, chunks := range splitfeed.Cuts(whole) {
		check("split at "+strconv.Itoa(i), chunks)
	}
}

func TestFixtures(t *testing.T) {
	fx := loadFixtures(t)
	done := func(data string) rec { return rec{Data: data, Retry: -1, Unterminated: true} }
	tests := []struct {
		file     string
		events   int
		comments int64
		want     []rec              // full expectation, when short enough to write out
		check    func([]rec) string // spot checks for long realistic streams
	}{
		{
			file: "openai_chat.sse", events: 14,
			check: func(r []rec) string {
				if r[len(r)-1] != ev("", "[DONE]", "") {
					return "last event is not [DONE]"
				}
				if !strings.Contains(r[1].Data, `"delta":{"content":"Hello"}`) {
					return "second event is not the Hello delta: " + r[1].Data
				}
				if !strings.Contains(r[12].Data, `"completion_tokens":10`) {
					return "usage chunk missing"
				}
				return ""
			},
		},
		{
			file: "anthropic_messages.sse", events: 11,
			check: func(r []rec) string {
				var types []string
				for _, e := range r {
					types = append(types, e.Type)
					if !strings.Contains(e.Data, `"type":"`+e.Type+`"`) {
						return "event type does not match payload: " + e.Type
					}
				}
				want := "message_start content_block_start ping content_block_delta content_block_delta content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"
				if got := strings.Join(types, " "); got != want {
					return "types: " + got
				}
				return ""
			},
		},
		{
			file: "gemini_crlf.sse", events: 3,
			check: func(r []rec) string {
				for _, e := range r {
					if strings.ContainsAny(e.Data, "\r\n") || !strings.HasPrefix(e.Data, `{"candidates"`) {
						return "bad data: " + e.Data
					}
				}
				if !strings.Contains(r[2].Data, `"finishReason":"STOP"`) {
					return "last chunk lacks finishReason"
				}
				return ""
			},
		},
		{
			file: "lone_cr.sse", comments: 1,
			want: []rec{
				ev("token", `{"t":"one"}`, ""),
				ev("", "{\"t\":\"two\"}\n{\"t\":\"two-b\"}", "7"),
				ev("", `{"t":"three"}`, "7"),
			},
		},
		{
			file: "openrouter_comments.sse", events: 5, comments: 5,
			check: func(r []rec) string {
				if r[4] != ev("", "[DONE]", "") || !strings.Contains(r[3].Data, `"finish_reason":"stop"`) {
					return "tail events wrong"
				}
				return ""
			},
		},
		{
			file: "tgi_nospace.sse", events: 4,
			check: func(r []rec) string {
				for _, e := range r {
					if !strings.HasPrefix(e.Data, `{"index":`) {
						return "data lost its first byte: " + e.Data
					}
				}
				return ""
			},
		},
		{
			file: "multiline_data.sse",
			want: []rec{
				ev("", "first line\nsecond line\n two-space value", ""),
				ev("", "\n", ""),
				ev("", "", ""),
				ev("", "{\n  \"k\": \"v\"\n}", ""),
				ev("multi", "a\n\nb", ""),
			},
		},
		{
			file: "id_retry.sse",
			want: []rec{
				ev("", "one", "evt-1"),
				ev("", "two, id persists", "evt-1"),
				{Data: "three", ID: "evt-3", Retry: 1500},
				ev("", "bad retry ignored", "evt-3"),
				ev("", "NUL id ignored", "evt-3"),
				ev("", "id cleared", ""),
				{Data: "seven", ID: "evt-7", Retry: math.MaxInt64},
				ev("", "only this", "evt-7"),
			},
		},
		{
			file: "bom.sse",
			want: []rec{ev("", "after bom", ""), ev("", "x", "")},
		},
		{
			file: "llamacpp_eof.sse", events: 4,
			check: func(r []rec) string {
				if r[3] != done("[DONE]") {
					return "final [DONE] not dispatched as unterminated"
				}
				if r[2].Unterminated || !strings.Contains(r[2].Data, `"timings"`) {
					return "usage chunk wrong"
				}
				return ""
			},
		},
		{
			file: "eof_no_newline.sse",
			want: []rec{ev("", `{"ok":true}`, ""), {Type: "done", Data: `{"truncated":`, Retry: -1, Unterminated: true}},
		},
		{
			file: "event_without_data.sse",
			want: []rec{ev("", "real event", "hb-1"), ev("typed", "typed event", "hb-1")},
		},
		{
			file: "mixed_line_ends.sse",
			want: []rec{ev("", "lf", ""), ev("", "crlf", ""), ev("", "cr", ""), ev("", "mixed", ""), ev("", "mixed2", ""), ev("", "mixed3", "")},
		},
	}
	seen := map[string]bool{}
	for _, tc := range tests {
		seen[tc.file] = true
		t.Run(tc.file, func(t *testing.T) {
			in, ok := fx[tc.file]
			if !ok {
				t.Fatalf("fixture %s missing", tc.file)
			}
			got, st := decodeChunks([][]byte{in}, 0)
			if tc.want != nil {
				if !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("events:\n got %q\nwant %q", got, tc.want)
				}
			} else if len(got) != tc.events {
				t.Fatalf("got %d events, want %d: %q", len(got), tc.events, got)
			}
			if tc.check != nil {
				if msg := tc.check(got); msg != "" {
					t.Fatal(msg)
				}
			}
			if st.Events != int64(len(got)) || st.Comments != tc.comments || st.Oversized != 0 || st.Bytes != int64(len(in)) {
				t.Fatalf("stats %+v", st)
			}
		})
	}
	for name := range fx {
		if !seen[name] {
			t.Errorf("fixture %s has no expectations", name)
		}
	}
}

// TestSplitInvariance feeds every fixture whole, byte by byte, at every
// single split point and at random multi-splits, with the default cap and
// with caps small enough to make realistic events oversized.
func TestSplitInvariance(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for name, in := range loadFixtures(t) {
		for _, maxEvent := range []int{0, 1, 40, 200} {
			t.Run(name+"/max="+strconv.Itoa(maxEvent), func(t *testing.T) {
				want, wantSt := decodeChunks([][]byte{in}, maxEvent)
				checkSplits(t, in, maxEvent, want, wantSt)
				for i := 0; i < 300; i++ {
					chunks := splitfeed.Random(r, in)
					got, st := decodeChunks(chunks, maxEvent)
					if !reflect.DeepEqual(got, want) || st != wantSt {
						t.Fatalf("random split %d (%d chunks):\n got %q %+v\nwant %q %+v", i, len(chunks), got, st, want, wantSt)
					}
				}
			})
		}
	}
}

func TestWriteDoesNotRetainBuffer(t *testing.T) {
	var got []string
	d := &Decoder{OnEvent: func(e *Event) { got = append(got, string(e.Data)) }}
	buf := []byte("data: abc\n")
	d.Write(buf) // the value would be aliased if the event ended here
	copy(buf, "XXXXXXXXXX")
	buf = append(buf[:0], "data: def\n\n"...)
	d.Write(buf)
	if len(got) != 1 || got[0] != "abc\ndef" {
		t.Fatalf("got %q", got)
	}
	if d.ev.Data != nil || d.alias != nil {
		t.Fatal("decoder still references a Write buffer after Write returned")
	}
}

func TestCloseKeepsStatsResetZeroes(t *testing.T) {
	var got []rec
	d := &Decoder{OnEvent: func(e *Event) {
		got = append(got, rec{Data: string(e.Data), ID: string(e.ID), Retry: e.Retry, Unterminated: e.Unterminated})
	}}
	d.Write([]byte("\xEF\xBB\xBFid: 1\ndata: a\n\n: c\ndata: b"))
	d.Close()
	want := Stats{Events: 2, Comments: 1, Bytes: 29}
	if st := d.Stats(); st != want {
		t.Fatalf("after Close: %+v, want %+v", st, want)
	}
	// A new stream after Close: BOM allowed again, last event ID forgotten.
	d.Write([]byte("\xEF\xBB\xBFdata: c\n\n"))
	d.Close()
	wantEv := []rec{{Data: "a", ID: "1", Retry: -1}, {Data: "b", ID: "1", Retry: -1, Unterminated: true}, {Data: "c", Retry: -1}}
	if !reflect.DeepEqual(got, wantEv) {
		t.Fatalf("events %q, want %q", got, wantEv)
	}
	d.Reset()
	if st := d.Stats(); st != (Stats{}) {
		t.Fatalf("after Reset: %+v", st)
	}
	// Close twice is harmless.
	d.Close()
	d.Close()
	if len(got) != 3 {
		t.Fatalf("Close on an empty stream dispatched: %q", got)
	}
}

func TestResetMidEvent(t *testing.T) {
	var got []string
	d := &Decoder{OnEvent: func(e *Event) { got = append(got, string(e.Data)) }}
	d.Write([]byte("\xEF\xBBid: 3\nevent: x\ndata: partial\ndata: more\r"))
	d.Reset()
	d.Write([]byte("\ndata: fresh\n\n")) // the LF is a blank line now, not a CRLF tail
	d.Close()
	if len(got) != 1 || got[0] != "fresh" {
		t.Fatalf("after Reset mid-event: got %q", got)
	}
	d.Reset()
	got = nil
	d.Write([]byte("data: partial"))
	d.Reset()
	d.Write([]byte("\xEF\xBB\xBFdata: fresh\n\n"))
	if len(got) != 1 || got[0] != "fresh" {
		t.Fatalf("got %q", got)
	}
}

func TestNilOnEvent(t *testing.T) {
	d := &Decoder{}
	d.Write([]byte("data: a\n\ndata: b"))
	d.Close()
	if st := d.Stats(); st.Events != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestResetShrinksHugeBuffers(t *testing.T) {
	d := &Decoder{}
	big := "data: " + strings.Repeat("x", 200<<10) + "\n"
	d.Write([]byte(big[:100]))
	d.Write([]byte(big[100:]))
	if cap(d.data) <= shrinkAbove {
		t.Fatalf("test did not grow the data buffer (cap %d)", cap(d.data))
	}
	d.Reset()
	if cap(d.data) > shrinkAbove || cap(d.line) > shrinkAbove {
		t.Fatalf("huge buffers kept: data %d line %d", cap(d.data), cap(d.line))
	}
}

// TestOversizeNeverBuffered checks the memory bound itself: a 10 MiB line,
// fed in small writes, must never make the decoder hold more than the cap.
func TestOversizeNeverBuffered(t *testing.T) {
	var got []string
	d := &Decoder{MaxEventSize: 4096, OnEvent: func(e *Event) { got = append(got, string(e.Data)) }}
	d.Write([]byte("data: "))
	chunk := bytes.Repeat([]byte("y"), 1000)
	for i := 0; i < 10<<10; i++ {
		d.Write(chunk)
		if cap(d.line) > 2*4096 || cap(d.data) > 2*4096 {
			t.Fatalf("buffered %d/%d bytes of an oversized line", cap(d.line), cap(d.data))
		}
	}
	d.Write([]byte("\n\ndata: next\n\n"))
	if len(got) != 1 || got[0] != "next" || d.Stats().Oversized != 1 {
		t.Fatalf("got %q, stats %+v", got, d.Stats())
	}
}

// TestZeroAllocs is the hot-path guarantee: once warmed up, decoding a whole
// stream, in any chunking, allocates nothing.
func TestZeroAllocs(t *testing.T) {
	fx := loadFixtures(t)
	var sink int
	d := &Decoder{OnEvent: func(e *Event) { sink += len(e.Data) + len(e.Type) + len(e.ID) }}
	for _, name := range []string{"openai_chat.sse", "anthropic_messages.sse", "gemini_crlf.sse", "multiline_data.sse", "bom.sse", "llamacpp_eof.sse"} {
		in := fx[name]
		for _, size := range []int{1, 7, 64, 4096} {
			writes := splitfeed.Sized(in, size)
			feed := func() {
				for _, w := range writes {
					d.Write(w)
				}
				d.Close()
				d.Reset()
			}
			feed() // warm up: grow the buffers once
			if a := testing.AllocsPerRun(50, feed); a != 0 {
				t.Errorf("%s in %d-byte writes: %v allocs per stream, want 0", name, size, a)
			}
		}
	}
	_ = sink
}

// TestOnComment: comment lines reach OnComment whole, in order with the
// events, however the writes split them; one over the cap is counted and
// not handed out; the decoder then still allocates nothing per stream.
func TestOnComment(t *testing.T) {
	note := func(line string) rec { return rec{Data: line, Comment: true} }
	for _, tc := range []struct {
		name string
		in   string
		max  int
		want []rec
	}{
		{name: "stamp before its event", in: ": sent=1\ndata: a\n\n", want: []rec{note(": sent=1"), ev("", "a", "")}},
		{name: "crlf and bare cr", in: ": x\r\ndata: a\r\r: y\r", want: []rec{note(": x"), ev("", "a", ""), note(": y")}},
		{name: "bare colon", in: ":\ndata: a\n\n", want: []rec{note(":"), ev("", "a", "")}},
		{name: "inside an event, before its blank line", in: "data: a\n: mid\n\n", want: []rec{note(": mid"), ev("", "a", "")}},
		{name: "last line without its line end", in: "data: a\n\n: tail", want: []rec{ev("", "a", ""), note(": tail")}},
		{name: "over the cap is not handed out", in: ": " + strings.Repeat("x", 40) + "\ndata: a\n\n", max: 16, want: []rec{ev("", "a", "")}},
		{name: "during an oversized event", in: "data: " + strings.Repeat("x", 40) + "\n: k\n\ndata: b\n\n", max: 16, want: []rec{note(": k"), ev("", "b", "")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			for _, chunks := range [][][]byte{{in}, splitfeed.Bytewise(in)} {
				got, st := decodeChunksNotes(chunks, tc.max)
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%d writes: got %q, want %q", len(chunks), got, tc.want)
				}
				if _, plain := decodeChunks(chunks, tc.max); st != plain {
					t.Errorf("%d writes: stats %+v, without OnComment %+v", len(chunks), st, plain)
				}
			}
		})
	}
	var n int
	d := &Decoder{OnEvent: func(e *Event) { n += len(e.Data) }, OnComment: func(line []byte) { n += len(line) }}
	writes := splitfeed.Sized([]byte(": sent=1\ndata: a\n\n: sent=2\ndata: b\n\n"), 3)
	feed := func() {
		for _, w := range writes {
			d.Write(w)
		}
		d.Close()
		d.Reset()
	}
	feed()
	if a := testing.AllocsPerRun(50, feed); a != 0 {
		t.Errorf("%v allocs per stream with OnComment, want 0", a)
	}
}

func TestParseRetry(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"3000", 3000, true},
		{"007", 7, true},
		{"9223372036854775807", math.MaxInt64, true},
		{"9223372036854775808", math.MaxInt64, true},
		{"92233720368547758070", math.MaxInt64, true},
		{"", 0, false},
		{"1.5", 0, false},
		{"+1", 0, false},
		{"1e3", 0, false},
		{"١", 0, false}, // non-ASCII digit
		{"99999999999999999999x", 0, false},
	}
	for _, tc := range tests {
		got, ok := parseRetry([]byte(tc.in))
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("parseRetry(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
