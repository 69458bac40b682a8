package sse

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/splitfeed"
)

// FuzzDecoder checks the decoder's two core promises on arbitrary input: it
// decodes the same events however the stream is split into writes, and those
// events are the ones the spec (as transcribed by refDecode) says.
//
// The split points are derived from a, b and c (taken modulo len+1, so every
// seed is a valid split) and maxSel picks the event cap: 0 means the default,
// anything else a small cap so the oversize path gets fuzzed too.
func FuzzDecoder(f *testing.F) {
	for _, in := range loadFixtures(f) {
		// Every single split point of every fixture, as asked of the
		// seed corpus: these are the boundaries a proxy can produce.
		for i := 0; i <= len(in); i++ {
			f.Add(in, uint16(i), uint16(i), uint16(i), uint8(0))
		}
		f.Add(in, uint16(len(in)/3), uint16(len(in)/2), uint16(2*len(in)/3), uint8(40))
		f.Add(in, uint16(1), uint16(2), uint16(3), uint8(1))
	}
	r := rand.New(rand.NewPCG(3, 5))
	for range 50 {
		f.Add(genStream(r), uint16(r.Uint32()), uint16(r.Uint32()), uint16(r.Uint32()), uint8(r.IntN(256)))
	}
	f.Fuzz(func(t *testing.T, in []byte, a, b, c uint16, maxSel uint8) {
		maxEvent := 0
		if maxSel != 0 {
			maxEvent = int(maxSel)
		}
		want, wantSt := refDecode(in, maxEvent)

		whole, wholeSt := decodeChunks([][]byte{in}, maxEvent)
		if !reflect.DeepEqual(whole, want) || wholeSt != wantSt {
			t.Fatalf("whole input disagrees with reference:\n got %q %+v\nwant %q %+v", whole, wholeSt, want, wantSt)
		}

		n := len(in) + 1
		cuts := []int{int(a) % n, int(b) % n, int(c) % n}
		slices.Sort(cuts)
		split, splitSt := decodeChunks(splitfeed.At(in, cuts...), maxEvent)
		if !reflect.DeepEqual(split, want) || splitSt != wantSt {
			t.Fatalf("split at %v disagrees:\n got %q %+v\nwant %q %+v", cuts, split, splitSt, want, wantSt)
		}

		notes, notesSt := refDecodeAll(in, maxEvent, true)
		if got, st := decodeChunksNotes(splitfeed.At(in, cuts...), maxEvent); !reflect.DeepEqual(got, notes) || st != notesSt {
			t.Fatalf("with comments, split at %v disagrees:\n got %q %+v\nwant %q %+v", cuts, got, st, notes, notesSt)
		}

		if len(in) <= 1024 { // bigger inputs: the fixtures, covered bytewise by TestSplitInvariance
			bw, bwSt := decodeChunks(splitfeed.Bytewise(in), maxEvent)
			if !reflect.DeepEqual(bw, want) || bwSt != wantSt {
				t.Fatalf("byte-by-byte disagrees:\n got %q %+v\nwant %q %+v", bw, bwSt, want, wantSt)
			}
		}
	})
}
