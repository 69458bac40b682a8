package meter

import (
	"math/bits"
	"time"
)

// ChunkGapBuckets is how many buckets ChunkGaps has: one per upper bound in
// ChunkGapBound, and one for the gaps above the last.
const ChunkGapBuckets = 15

// chunkGapBase is the upper bound of the first bucket. The buckets double
// from it, which makes them exactly the bucket boundaries that the
// OpenTelemetry GenAI conventions give their duration histograms
// (0.01 s, 0.02 s, ... 81.92 s), so that the per-chunk histogram can be
// exported without loss.
const chunkGapBase = 10 * time.Millisecond

// ChunkGaps is the distribution of the gaps between consecutive chunks of a
// stream: how many fell in each bucket and their total, per bucket. The
// conventions' time per output chunk is a histogram point per chunk after
// the first; keeping every gap would cost memory in proportion to the
// stream, while these fixed buckets cost nothing per chunk, and still give
// the exporter each bucket's exact count and each bucket's exact sum.
type ChunkGaps struct {
	// Count[i] counts the gaps in bucket i: gaps up to ChunkGapBound(0) in
	// bucket 0, gaps in (ChunkGapBound(i-1), ChunkGapBound(i)] in bucket i,
	// and gaps above ChunkGapBound(ChunkGapBuckets-2) in the last.
	Count [ChunkGapBuckets]uint32
	// Sum[i] is the total of the gaps counted in bucket i.
	Sum [ChunkGapBuckets]time.Duration
}

// ChunkGapBound returns the inclusive upper bound of bucket i, for i below
// ChunkGapBuckets-1; the last bucket has no upper bound.
func ChunkGapBound(i int) time.Duration { return chunkGapBase << i }

// add counts one gap. It runs once per chunk: a division and a bit count,
// not a search through the bounds.
func (g *ChunkGaps) add(gap time.Duration) {
	i := 0
	if gap > chunkGapBase {
		// q is gap / base rounded up; bucket i holds q in (2^(i-1), 2^i].
		q := uint64((gap + chunkGapBase - 1) / chunkGapBase)
		i = bits.Len64(q - 1)
		if i > ChunkGapBuckets-1 {
			i = ChunkGapBuckets - 1
		}
	}
	g.Count[i]++
	g.Sum[i] += gap
}

// Total returns how many gaps were counted: the chunks after the first.
func (g *ChunkGaps) Total() int64 {
	var n int64
	for _, c := range g.Count {
		n += int64(c)
	}
	return n
}
