package splitfeed

// Target is what Feed writes to: what the framing packages' decoders have
// in common, a stream taken in writes and ended with Close. (Not named
// Decoder: the fuzz coverage test takes a package with a Decoder type for
// a decoder that needs a fuzz target.)
type Target interface {
	Write(p []byte) (int, error)
	Close()
}

// Feed writes the pieces to d as a proxy does, then closes it. Each piece
// is first copied into one scratch buffer, which is overwritten after
// every Write: a proxy reuses its buffer, so a decoder that kept a
// reference to a write past the call would see garbage in its later
// events, and the comparison with an unsplit run would fail. Feed panics
// if a Write does not return len(p), nil, as the decoders promise.
func Feed(d Target, pieces [][]byte) {
	var scratch []byte
	for _, p := range pieces {
		scratch = append(scratch[:0], p...)
		n, err := d.Write(scratch)
		if n != len(p) || err != nil {
			panic("splitfeed: Write did not return len(p), nil")
		}
		for i := range scratch {
			scratch[i] = 'X'
		}
	}
	d.Close()
}
