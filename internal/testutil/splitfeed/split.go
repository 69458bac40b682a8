package splitfeed

import (
	"iter"
	"math/rand/v2"
)

// At cuts b at the given offsets, which must be sorted and within
// [0, len(b)]: n cuts make n+1 pieces, empty ones included. The pieces
// share b's memory.
func At(b []byte, cuts ...int) [][]byte {
	out := make([][]byte, 0, len(cuts)+1)
	prev := 0
	for _, c := range cuts {
		out = append(out, b[prev:c])
		prev = c
	}
	return append(out, b[prev:])
}

// Cuts yields every two-piece split of b, cut at c from 0 to len(b): the
// boundaries a proxy can put in any stream, each tried once.
func Cuts(b []byte) iter.Seq2[int, [][]byte] {
	return func(yield func(int, [][]byte) bool) {
		for c := 0; c <= len(b); c++ {
			if !yield(c, At(b, c)) {
				return
			}
		}
	}
}

// Bytewise cuts b into one-byte pieces, the most hostile split.
func Bytewise(b []byte) [][]byte {
	return Sized(b, 1)
}

// Sized cuts b into pieces of size bytes, the last one shorter: the writes
// of a proxy's copy buffer, or of an awkward TCP segmentation. size must be
// at least 1.
func Sized(b []byte, size int) [][]byte {
	if size < 1 {
		panic("splitfeed: Sized needs a size of at least 1")
	}
	out := make([][]byte, 0, (len(b)+size-1)/size)
	for len(b) > 0 {
		n := min(size, len(b))
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// Random cuts b into random pieces, mostly short (up to 40 bytes), now and
// then long, and empty ones included, because a proxy can hand the decoder
// zero-length writes too. The same r gives the same pieces.
func Random(r *rand.Rand, b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		n := r.IntN(min(len(b), 40) + 1)
		if r.IntN(8) == 0 {
			n = r.IntN(len(b) + 1)
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}
