package sse

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/splitfeed"
)

// splitEnds runs a Splitter over pieces and returns the event ends it
// reports, as offsets in the whole stream.
func splitEnds(pieces [][]byte) []int {
	var s Splitter
	var ends, buf []int
	base := 0
	for _, p := range pieces {
		buf = s.AppendEnds(buf[:0], p)
		for _, e := range buf {
			ends = append(ends, base+e)
		}
		base += len(p)
	}
	return ends
}

// refEnds reads a whole stream the slow, obvious way: one leading BOM
// dropped, then line by line, each of CRLF, LF and CR ending a line; an
// event ends after the line end of each blank line.
func refEnds(in []byte) []int {
	ends := []int{}
	i := 0
	if len(in) >= 3 && in[0] == 0xEF && in[1] == 0xBB && in[2] == 0xBF {
		i = 3
	}
	lineStart := i
	for ; i < len(in); i++ {
		switch in[i] {
		case '\r', '\n':
			blank := i == lineStart
			if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
				i++
			}
			if blank {
				ends = append(ends, i+1)
			}
			lineStart = i + 1
		}
	}
	return ends
}

// joined drops the ends a split write adds: an event reported at the CR
// that ended a write, whose CRLF's LF then came back alone. Read whole,
// the same event ends after that LF.
func joined(in []byte, ends []int) []int {
	out := []int{}
	for _, e := range ends {
		if e < len(in) && in[e-1] == '\r' && in[e] == '\n' {
			continue
		}
		out = append(out, e)
	}
	return out
}

// checkEnds checks what a Splitter reports for in cut at cuts: the
// reference's ends, plus an LF of its own only where a cut fell inside a
// CRLF that ended an event.
func checkEnds(t *testing.T, in []byte, cuts []int, want []int) {
	t.Helper()
	got := splitEnds(splitfeed.At(in, cuts...))
	if j := joined(in, got); !reflect.DeepEqual(j, want) {
		t.Fatalf("cut at %v: ends %v, want %v", cuts, got, want)
	}
	for _, e := range got {
		if e < len(in) && in[e-1] == '\r' && in[e] == '\n' && !slices.Contains(cuts, e) {
			t.Fatalf("cut at %v: an end at %d, inside a CRLF no cut split", cuts, e)
		}
	}
}

func TestSplitterCases(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []int
	}{
		{"LF", "data: a\n\ndata: b\n\n", []int{9, 18}},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []int{11, 22}},
		{"bare CR", "data: a\r\rdata: b\r\r", []int{9, 18}},
		{"mixed line ends", "data: a\r\n\ndata: b\n\rdata: c\r\r\n", []int{10, 19, 29}},
		{"a CRLF is one line end", "data: a\r\ndata: b\r\n\r\n", []int{20}},
		{"CR LF LF", "data: a\r\n\n", []int{10}},
		{"LF CR LF", "data: a\n\r\n", []int{10}},
		{"comment", ": keep-alive\n\ndata: a\n\n", []int{14, 23}},
		{"comment before data", ": ping\ndata: a\n\n", []int{16}},
		{"multi-line data", "data: a\ndata: b\n\n", []int{17}},
		{"event and id fields", "event: x\nid: 1\ndata: a\n\n", []int{24}},
		{"blank lines alone", "\n\n\r\n\r", []int{1, 2, 4, 5}},
		{"unended event", "data: a\n", []int{}},
		{"no line end", "data: a", []int{}},
		{"BOM then blank line", "\xEF\xBB\xBF\ndata: a\n\n", []int{4, 13}},
		{"BOM only once", "\xEF\xBB\xBF\xEF\xBB\xBF\n\n", []int{8}},
		{"partial BOM is content", "\xEF\xBB\n\n", []int{4}},
		{"empty", "", []int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.in)
			if ref := refEnds(in); !reflect.DeepEqual(ref, tt.want) {
				t.Fatalf("reference says %v, the case %v", ref, tt.want)
			}
			checkEnds(t, in, nil, tt.want)
			for c := range len(in) + 1 {
				checkEnds(t, in, []int{c}, tt.want)
			}
			bytewise := make([]int, 0, len(in))
			for c := range len(in) + 1 {
				bytewise = append(bytewise, c)
			}
			checkEnds(t, in, bytewise, tt.want)
		})
	}
}

// TestSplitterEndsCRAtWriteEnd: an event whose blank line ends with the CR
// that ends a write is reported at once, not when the next write comes.
func TestSplitterEndsCRAtWriteEnd(t *testing.T) {
	var s Splitter
	if got := s.AppendEnds(nil, []byte("data: a\r\n\r")); !reflect.DeepEqual(got, []int{10}) {
		t.Fatalf("first write: ends %v, want [10]", got)
	}
	if got := s.AppendEnds(nil, []byte("\ndata: b\r\r")); !reflect.DeepEqual(got, []int{1, 10}) {
		t.Fatalf("second write: ends %v, want [1 10] (the LF alone, then the event)", got)
	}
	if got := s.AppendEnds(nil, []byte("data: c\r")); len(got) != 0 {
		t.Fatalf("third write: ends %v, want none", got)
	}
	if got := s.AppendEnds(nil, []byte("\n\n")); !reflect.DeepEqual(got, []int{2}) {
		t.Fatalf("fourth write: ends %v, want [2]: that LF was the CRLF's, inside the event", got)
	}
}

// checkPieces checks that the pieces the ends delimit decode, each on its
// own, to the events the whole stream decodes to: a Splitter never cuts an
// event in two and never joins two. Each piece after the first is decoded
// after a blank line, which dispatches nothing and ends the decoder's
// start of stream, so a BOM in mid-stream stays content as it should; IDs
// are left out, since the last event ID carries across events.
func checkPieces(t *testing.T, in []byte, ends []int) {
	t.Helper()
	want, _ := decodeChunks([][]byte{in}, 0)
	var got []rec
	prev := 0
	for _, e := range append(ends, len(in)) {
		piece := in[prev:e]
		if prev > 0 {
			piece = append([]byte("\n"), piece...)
		}
		evs, _ := decodeChunks([][]byte{piece}, 0)
		got = append(got, evs...)
		prev = e
	}
	for i := range want {
		want[i].ID = ""
	}
	for i := range got {
		got[i].ID = ""
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("input %q cut at %v:\n pieces decode to %q\n the stream to     %q", in, ends, got, want)
	}
}

func TestSplitterAgreesWithDecoder(t *testing.T) {
	for name, in := range loadFixtures(t) {
		t.Run(name, func(t *testing.T) {
			want := refEnds(in)
			checkEnds(t, in, nil, want)
			checkPieces(t, in, want)
			checkEnds(t, in, []int{len(in) / 3, len(in) / 2}, want)
			checkPieces(t, in, splitEnds(splitfeed.Bytewise(in)))
		})
	}
	n := 5000
	if testing.Short() {
		n = 500
	}
	r := rand.New(rand.NewPCG(13, 17))
	for range n {
		in := genStream(r)
		want := refEnds(in)
		for _, pieces := range [][][]byte{{in}, splitfeed.Random(r, in), splitfeed.Bytewise(in)} {
			ends := splitEnds(pieces)
			if j := joined(in, ends); !reflect.DeepEqual(j, want) {
				t.Fatalf("input %q in %d pieces: ends %v, want %v", in, len(pieces), ends, want)
			}
			checkPieces(t, in, ends)
		}
	}
}

// TestSplitterZeroAllocs: finding the ends allocates nothing once the
// caller's slice has grown.
func TestSplitterZeroAllocs(t *testing.T) {
	fx := loadFixtures(t)
	var ends []int
	for _, name := range []string{"openai_chat.sse", "gemini_crlf.sse", "lone_cr.sse", "bom.sse"} {
		for _, size := range []int{1, 7, 4096} {
			writes := splitfeed.Sized(fx[name], size)
			run := func() {
				var s Splitter
				for _, w := range writes {
					ends = s.AppendEnds(ends[:0], w)
				}
			}
			run()
			if a := testing.AllocsPerRun(50, run); a != 0 {
				t.Errorf("%s in %d-byte writes: %v allocs per stream, want 0", name, size, a)
			}
		}
	}
}
