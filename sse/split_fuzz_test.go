package sse

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/splitfeed"
)

// FuzzSplitter checks on arbitrary input that a Splitter finds the ends the
// spec's line rules give (refEnds) however the stream is split, and that
// the pieces between them decode to the stream's events.
//
// The split points are derived from a, b and c, taken modulo len+1 so that
// every seed is a valid split.
func FuzzSplitter(f *testing.F) {
	for _, in := range loadFixtures(f) {
		for i := 0; i <= len(in); i += 7 {
			f.Add(in, uint16(i), uint16(i+1), uint16(i+2))
		}
	}
	for _, in := range []string{"data: a\r\rdata: b\r\r", "data: a\r\n\r\ndata: b\r\n\r\n", "\xEF\xBB\xBF\r\n\r", "\xEF\xBB\n\r\n"} {
		for i := 0; i <= len(in); i++ {
			f.Add([]byte(in), uint16(i), uint16(i), uint16(i))
		}
	}
	r := rand.New(rand.NewPCG(19, 23))
	for range 50 {
		f.Add(genStream(r), uint16(r.Uint32()), uint16(r.Uint32()), uint16(r.Uint32()))
	}
	f.Fuzz(func(t *testing.T, in []byte, a, b, c uint16) {
		want := refEnds(in)
		n := len(in) + 1
		cuts := []int{int(a) % n, int(b) % n, int(c) % n}
		slices.Sort(cuts)
		checkEnds(t, in, cuts, want)
		checkPieces(t, in, splitEnds(splitfeed.At(in, cuts...)))
	})
}
