package jsonarray

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/splitfeed"
)

// FuzzDecoder checks, on any input, that the decoder does not panic and
// gives the same elements and counts however the input is split; and, on
// input encoding/json can read unambiguously, that it agrees with it.
// maxSel picks a small element cap (0 means the default) so the oversize
// path is fuzzed too.
func FuzzDecoder(f *testing.F) {
	for _, b := range fixtures(f) {
		for c := 0; c <= len(b); c++ {
			f.Add(b, uint16(c), uint8(0))
		}
		f.Add(b, uint16(len(b)/2), uint8(40))
	}
	r := rand.New(rand.NewPCG(5, 8))
	for range 50 {
		f.Add(genStream(r), uint16(r.Uint32()), uint8(r.IntN(256)))
	}
	f.Fuzz(func(t *testing.T, b []byte, cut uint16, maxSel uint8) {
		max := DefaultMaxElementSize
		if maxSel > 0 {
			max = int(maxSel)
		}
		c := int(cut) % (len(b) + 1)
		wd := &Decoder{MaxElementSize: max}
		whole := decode(wd, b)
		sd := &Decoder{MaxElementSize: max}
		split := decode(sd, splitfeed.At(b, c)...)
		if !reflect.DeepEqual(whole, split) || wd.Stats() != sd.Stats() {
			t.Fatalf("cut %d: got %q %+v, whole gave %q %+v", c, split, sd.Stats(), whole, wd.Stats())
		}
		if len(b) <= 1024 {
			bd := &Decoder{MaxElementSize: max}
			if bw := decode(bd, splitfeed.Bytewise(b)...); !reflect.DeepEqual(whole, bw) || wd.Stats() != bd.Stats() {
				t.Fatalf("byte by byte: got %q %+v, whole gave %q %+v", bw, bd.Stats(), whole, wd.Stats())
			}
		}
		if wd.Stats().Bytes != int64(len(b)) {
			t.Fatalf("Bytes %d, fed %d", wd.Stats().Bytes, len(b))
		}
		want, wantOver, ok := reference(b, max)
		if !ok {
			return
		}
		if !reflect.DeepEqual(whole, want) || wd.Stats().Oversized != wantOver || wd.Stats().Errors != 0 {
			t.Fatalf("disagrees with encoding/json:\n got %q %+v\nwant %q oversized %d", whole, wd.Stats(), want, wantOver)
		}
	})
}
