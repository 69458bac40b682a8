package stats

import (
	"math/bits"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"
)

// The strata are what makes a fair comparison of two rows possible
// (compare.go): a model's speed depends on its load and on the prompt's
// length as much as on the model, so each row keeps time to first token
// and output tokens/s per cell of (in-flight level x input size), and two
// rows are compared cell by cell, on the conditions both saw.
//
// In-flight levels are the in-flight view's seven doubling buckets
// (inflight.go). Input sizes are eight buckets of input tokens that double
// from 512: below 512, 512-1023, 1k-2k, ... 16k-32k, and 32k or more.
// Doubling because prefill time grows about linearly with the prompt, so a
// cell spans at most a factor of two of it (the last cell excepted), like
// the in-flight buckets; from 512 because shorter prompts' prefill is a
// small part of time to first token next to the fixed overhead.
//
// 56 cells of two sketches in every slice would multiply the store's
// memory, so the strata are kept lean, each choice stated in
// docs/live-stats.md: only in the 5m and 1h windows (a minute seldom holds
// enough requests per cell to compare, and the day would double the cost),
// as two half-window slices like the in-flight view, with sketches of
// StrataAccuracy and strataBins bins, allocated when a cell is first used,
// the whole strata of a row only when it first records a request whose
// level and input size are known.
const (
	numInputBuckets = 8
	// inputBucketBase is the upper end (exclusive) of the first input
	// bucket, in tokens.
	inputBucketBase = 512
	numCells        = numInflightBuckets * numInputBuckets
	// StrataAccuracy is the relative accuracy of the strata's sketches.
	StrataAccuracy = 0.02
	// strataBins bounds each strata sketch: at 2 % they span gamma^127
	// (gamma = 1.02/0.98), a factor of about 160, as the slice sketches'
	// 256 bins do at 1 %.
	strataBins = 128
	// numStrataWindows is how many windows keep strata.
	numStrataWindows = 2
)

// strataWindow maps a window to its index among the strata's windows, -1
// for a window without strata.
var strataWindow = [numWindows]int{Window1m: -1, Window5m: 0, Window1h: 1, Window24h: -1}

// HasStrata reports whether window w keeps strata, and so can compare.
func (w Window) HasStrata() bool { return int(w) < numWindows && strataWindow[w] >= 0 }

// strataMapping is the strata sketches' index mapping, shared so that any
// two merge.
var strataMapping = func() *mapping.LogarithmicMapping {
	m, err := mapping.NewLogarithmicMapping(StrataAccuracy)
	if err != nil {
		panic(err) // a constant accuracy in (0, 1) cannot fail
	}
	return m
}()

var (
	strataLowestTemplate  = fullStore(store.NewCollapsingLowestDenseStore(strataBins), strataBins)
	strataHighestTemplate = fullStore(store.NewCollapsingHighestDenseStore(strataBins), strataBins)
)

// inputBucket is the bucket of n input tokens (n >= 0).
func inputBucket(n float64) int {
	if n < inputBucketBase {
		return 0
	}
	return min(bits.Len64(uint64(n)/inputBucketBase), numInputBuckets-1)
}

// InputRange is input bucket b's token counts, both included; hi is 0 for
// the open-ended last.
func InputRange(b int) (lo, hi int64) {
	if b == 0 {
		return 0, inputBucketBase - 1
	}
	lo = int64(inputBucketBase) << (b - 1)
	if b == numInputBuckets-1 {
		return lo, 0
	}
	return lo, lo<<1 - 1
}

// cellOf is the cell of in-flight bucket ib and input bucket nb.
func cellOf(ib, nb int) int { return ib*numInputBuckets + nb }

// strataSlice is one half-window of a row's strata.
type strataSlice struct {
	epoch    int64
	requests [numCells]int64
	sketches [numCells][numInflightMetrics]*ddsketch.DDSketch
}

func (s *strataSlice) reset(e int64) {
	s.epoch = e
	s.requests = [numCells]int64{}
	for c := range s.sketches {
		for _, sk := range s.sketches[c] {
			if sk != nil {
				sk.Clear()
			}
		}
	}
}

// rowStrata is a row's strata: each strata window's halves.
type rowStrata struct {
	halves [numStrataWindows][inflightHalves]strataSlice
}

func newRowStrata() *rowStrata {
	st := new(rowStrata)
	for w := range st.halves {
		for i := range st.halves[w] {
			st.halves[w][i].epoch = noEpoch
		}
	}
	return st
}

// newStrataSketch returns a bounded strata sketch of metric m, its bins
// allocated at full size so that recording never allocates.
func newStrataSketch(m Metric) *ddsketch.DDSketch {
	return newBoundedSketch(strataMapping, strataBins, strataLowestTemplate, strataHighestTemplate, metrics[m].slowTailLow)
}

func newStrataViewSketch() *ddsketch.DDSketch {
	return ddsketch.NewDDSketch(strataMapping, store.NewDenseStore(), store.NewDenseStore())
}

// recordStrata adds s to its cell in every strata window's half at t; ok
// says which of s's values are valid. Requests whose in-flight level or
// input size is unknown have no cell. The caller holds r.mu.
func (r *row) recordStrata(s *Sample, t int64, ok *[NumMetrics]bool) {
	if s.Inflight < 1 || !ok[InputTokens] {
		return
	}
	if r.strata == nil {
		r.strata = newRowStrata()
	}
	c := cellOf(inflightBucket(s.Inflight), inputBucket(s.values[InputTokens]))
	index, have := bucketIndexes(s, ok, strataMapping)
	for w, sw := range strataWindow {
		if sw < 0 {
			continue
		}
		e := floorDiv(t, inflightHalf(Window(w)))
		sl := &r.strata.halves[sw][mod(e, inflightHalves)]
		if sl.epoch != e {
			if sl.epoch > e {
				continue
			}
			sl.reset(e)
		}
		sl.requests[c]++
		addToBucket(&sl.sketches[c], &index, &have, newStrataSketch)
	}
}

// resetStrata empties the row's strata for reuse, keeping their memory.
// The caller holds r.mu.
func (r *row) resetStrata() {
	if r.strata == nil {
		return
	}
	for w := range r.strata.halves {
		for i := range r.strata.halves[w] {
			r.strata.halves[w][i].reset(noEpoch)
		}
	}
}

// cellAgg is one cell of an AggregateRow's strata.
type cellAgg struct {
	requests int64
	sketches [numInflightMetrics]*ddsketch.DDSketch
}

// aggStrata is an AggregateRow's strata, by cell.
type aggStrata [numCells]cellAgg

// viewStrata merges window w's strata halves that now still covers into
// into; windows without strata add nothing. The caller holds r.mu.
func (r *row) viewStrata(w Window, now int64, into *AggregateRow) {
	sw := strataWindow[w]
	if sw < 0 || r.strata == nil {
		return
	}
	cur := floorDiv(now, inflightHalf(w))
	for i := range r.strata.halves[sw] {
		sl := &r.strata.halves[sw][i]
		if sl.epoch == noEpoch || sl.epoch > cur || sl.epoch <= cur-inflightHalves {
			continue
		}
		for c := range sl.sketches {
			if sl.requests[c] == 0 {
				continue
			}
			if into.strata == nil {
				into.strata = new(aggStrata)
			}
			into.strata[c].requests += sl.requests[c]
			mergeSketches(into.strata[c].sketches[:], sl.sketches[c][:], newStrataViewSketch)
		}
	}
}

// mergeStrata merges b's cells into *a, copying b's sketches.
func mergeStrata(a **aggStrata, b *aggStrata) {
	if b == nil {
		return
	}
	if *a == nil {
		*a = new(aggStrata)
	}
	for c := range b {
		(*a)[c].requests += b[c].requests
		mergeSketches((*a)[c].sketches[:], b[c].sketches[:], newStrataViewSketch)
	}
}
