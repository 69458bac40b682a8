package eventstream

import (
	"reflect"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/splitfeed"
)

// FuzzDecoder checks the decoder on arbitrary input against AWS's decoder
// (the same messages; an error only where AWS's decoder fails too) and
// against itself cut at any point, with the default cap and, via maxSel, a
// small one so that oversized messages are skipped mid-stream.
func FuzzDecoder(f *testing.F) {
	for _, b := range loadFixtures(f) {
		// Every split point of every fixture, as the proxy can cut a body
		// anywhere.
		for c := 0; c <= len(b); c++ {
			f.Add(b, uint16(c), uint8(0))
		}
		f.Add(b, uint16(len(b)/2), uint8(64))
	}
	f.Fuzz(func(t *testing.T, b []byte, cut uint16, maxSel uint8) {
		c := int(cut) % (len(b) + 1)
		checkAgainstAWS(t, b, c)
		if maxSel == 0 {
			return
		}
		max := int(maxSel)
		whole, wholeSt := decodeChunks([][]byte{b}, max)
		split, splitSt := decodeChunks(splitfeed.At(b, c), max)
		if !reflect.DeepEqual(whole, split) || wholeSt != splitSt {
			t.Fatalf("max %d cut %d: got %+v %+v, want %+v %+v", max, c, split, splitSt, whole, wholeSt)
		}
		if wholeSt.Errors > 1 || wholeSt.Messages != int64(len(whole)) {
			t.Fatalf("stats %+v", wholeSt)
		}
	})
}
