package injectusage

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/splitfeed"
)

// FuzzStripper checks the stripper's promises on arbitrary input, split
// into writes at points derived from a, b and c (taken modulo len+1, so
// every seed is a valid split): what the client gets never depends on how
// the stream was split; the meter gets the stream as it came; the client
// gets nothing that was not sent; and a stream with no "usage" in it (so
// nothing include_usage added) reaches the client unchanged.
func FuzzStripper(f *testing.F) {
	lf, err := os.ReadFile(filepath.Join("testdata", "chat_usage.sse"))
	if err != nil {
		f.Fatal(err)
	}
	seeds := [][]byte{
		lf,
		bytes.ReplaceAll(lf, []byte("\n"), []byte("\r\n")),
		bytes.ReplaceAll(lf, []byte("\n"), []byte("\r")),
		[]byte(stream("\r", role, text, usage, done)),
		[]byte(": keep-alive\n\n" + stream("\r\n", role) + ": ping\r" + stream("\n", usage)),
		[]byte("\xEF\xBB\xBF" + stream("\n", role, "event: x\n"+text, "data: {\"usage\":null,\ndata: \"a\":1}")),
		[]byte(stream("\n", plain1, done) + plain1),
		[]byte("data: {\"choices\": [ ], \"usage\": {}}\r\r\ndata: {\"a\":1 , \"usage\" : null}\n\r"),
	}
	for _, in := range seeds {
		n := uint16(len(in))
		f.Add(in, n/3, n/2, 2*n/3)
		f.Add(in, uint16(1), uint16(2), n-1)
	}
	f.Fuzz(func(t *testing.T, in []byte, a, b, c uint16) {
		n := len(in) + 1
		cuts := []int{int(a) % n, int(b) % n, int(c) % n}
		slices.Sort(cuts)
		// A cap the stream cannot cross: where a stream crossing it turns
		// to passthrough does depend on the writes.
		maxEvent := len(in) + 1
		whole, upstream := strip([][]byte{in}, maxEvent)
		if !bytes.Equal(upstream, in) {
			t.Fatalf("meter got %q, want the stream as sent", upstream)
		}
		split, upstream := strip(splitfeed.At(in, cuts...), maxEvent)
		if !bytes.Equal(split, whole) {
			t.Fatalf("input %q cut at %v: client got\n%q\nin one write\n%q", in, cuts, split, whole)
		}
		if !bytes.Equal(upstream, in) {
			t.Fatalf("cut at %v: meter got %q, want the stream as sent", cuts, upstream)
		}
		if len(in) <= 1024 {
			if bw, _ := strip(splitfeed.Bytewise(in), maxEvent); !bytes.Equal(bw, whole) {
				t.Fatalf("input %q byte by byte: client got\n%q\nin one write\n%q", in, bw, whole)
			}
		}
		if !isSubsequence(whole, in) {
			t.Fatalf("input %q: client got bytes that were not sent:\n%q", in, whole)
		}
		// gjson reads escaped keys too, so "usage" may hide behind a
		// backslash.
		if !bytes.Contains(in, []byte("usage")) && !bytes.Contains(in, []byte(`\`)) && !bytes.Equal(whole, in) {
			t.Fatalf("input %q has nothing injected, but the client got\n%q", in, whole)
		}
	})
}

// isSubsequence reports whether sub is what is left of b after removing
// some of its bytes.
func isSubsequence(sub, b []byte) bool {
	for _, c := range sub {
		i := bytes.IndexByte(b, c)
		if i < 0 {
			return false
		}
		b = b[i+1:]
	}
	return true
}
