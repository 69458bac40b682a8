package stats

import (
	"math/bits"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"
)

// The in-flight view answers "how does a model's speed fall as its
// concurrency rises": each row keeps time to first token and output
// tokens/s by the request's in-flight level (requests to the same upstream
// and model in flight when its response began, itself included), in seven
// buckets that double: 1, 2-3, 4-7, 8-15, 16-31, 32-63, 64 and more.
//
// Seven buckets of every metric in every slice would multiply the store's
// memory by eight, so the in-flight view is coarser in three ways, each
// stated in docs/live-stats.md: two metrics; sketches of InflightAccuracy
// and inflightBins bins; and per window a ring of two half-window slices
// instead of the window's own, so a view covers the last half to whole
// window.
const (
	numInflightBuckets = 7
	// InflightAccuracy is the relative accuracy of the in-flight sketches.
	InflightAccuracy = 0.04
	// inflightBins bounds each in-flight sketch; at 4 % they span
	// gamma^63 (gamma = 1.04/0.96), a factor of about 155, as the slice
	// sketches' 256 bins do at 1 %.
	inflightBins = 64
	// inflightHalves is the ring length of each window's in-flight slices.
	inflightHalves = 2
)

// inflightMetrics are the metrics kept by in-flight level.
var inflightMetrics = [...]Metric{TimeToFirstToken, OutputTokensPerSecond}

const numInflightMetrics = len(inflightMetrics)

// inflightMapping is the in-flight sketches' index mapping, shared so that
// any two merge.
var inflightMapping = func() *mapping.LogarithmicMapping {
	m, err := mapping.NewLogarithmicMapping(InflightAccuracy)
	if err != nil {
		panic(err) // a constant accuracy in (0, 1) cannot fail
	}
	return m
}()

var (
	inflightLowestTemplate  = fullStore(store.NewCollapsingLowestDenseStore(inflightBins), inflightBins)
	inflightHighestTemplate = fullStore(store.NewCollapsingHighestDenseStore(inflightBins), inflightBins)
)

// inflightBucket is the bucket of in-flight level n (n >= 1).
func inflightBucket(n int64) int {
	return min(bits.Len64(uint64(n))-1, numInflightBuckets-1)
}

// InflightRange is bucket b's levels; max is 0 for the open-ended last.
func InflightRange(b int) (lo, hi int64) {
	lo = int64(1) << b
	if b == numInflightBuckets-1 {
		return lo, 0
	}
	return lo, lo<<1 - 1
}

// inflightSlice is one half-window of a row's in-flight view.
type inflightSlice struct {
	epoch    int64
	requests [numInflightBuckets]int64
	sketches [numInflightBuckets][numInflightMetrics]*ddsketch.DDSketch
}

func (s *inflightSlice) reset(e int64) {
	s.epoch = e
	s.requests = [numInflightBuckets]int64{}
	for b := range s.sketches {
		for _, sk := range s.sketches[b] {
			if sk != nil {
				sk.Clear()
			}
		}
	}
}

// newInflightSketch returns a bounded in-flight sketch of metric m, its
// bins allocated at full size so that recording never allocates.
func newInflightSketch(m Metric) *ddsketch.DDSketch {
	return newBoundedSketch(inflightMapping, inflightBins, inflightLowestTemplate, inflightHighestTemplate, metrics[m].slowTailLow)
}

func newInflightViewSketch() *ddsketch.DDSketch {
	return ddsketch.NewDDSketch(inflightMapping, store.NewDenseStore(), store.NewDenseStore())
}

// inflightHalf is window w's in-flight slice length.
func inflightHalf(w Window) int64 {
	return int64(windows[w].slice) * int64(windows[w].count) / inflightHalves
}

// recordInflight adds s to every window's in-flight slice at t; ok says
// which of s's values are valid. The caller holds r.mu.
func (r *row) recordInflight(s *Sample, t int64, ok *[NumMetrics]bool) {
	if s.Inflight < 1 {
		return
	}
	b := inflightBucket(s.Inflight)
	index, have := bucketIndexes(s, ok, inflightMapping)
	for w := range r.inflight {
		e := floorDiv(t, inflightHalf(Window(w)))
		sl := &r.inflight[w][mod(e, inflightHalves)]
		if sl.epoch != e {
			if sl.epoch > e {
				continue
			}
			sl.reset(e)
		}
		sl.requests[b]++
		addToBucket(&sl.sketches[b], &index, &have, newInflightSketch)
	}
}

// bucketIndexes is, for each in-flight metric s has a valid value of, its
// bin index in mapping (zeroIndex for zero), computed once for every
// window's bucket. The in-flight view and the strata share it.
func bucketIndexes(s *Sample, ok *[NumMetrics]bool, mapping *mapping.LogarithmicMapping) (index [numInflightMetrics]int, have [numInflightMetrics]bool) {
	for i, m := range inflightMetrics {
		if have[i] = ok[m]; have[i] {
			if s.values[m] == 0 {
				index[i] = zeroIndex
			} else {
				index[i] = mapping.Index(s.values[m])
			}
		}
	}
	return index, have
}

// addToBucket adds a request's bin indexes to a bucket's sketches, making
// each with newSketch the first time the bucket sees its metric.
func addToBucket(sks *[numInflightMetrics]*ddsketch.DDSketch, index *[numInflightMetrics]int, have *[numInflightMetrics]bool, newSketch func(Metric) *ddsketch.DDSketch) {
	for i, m := range inflightMetrics {
		if !have[i] {
			continue
		}
		sk := sks[i]
		if sk == nil {
			sk = newSketch(m)
			sks[i] = sk
		}
		if index[i] == zeroIndex {
			_ = sk.Add(0) // zero is always trackable
		} else {
			sk.GetPositiveValueStore().Add(index[i])
		}
	}
}

// inflightAgg is one bucket of an AggregateRow's in-flight view.
type inflightAgg struct {
	requests int64
	sketches [numInflightMetrics]*ddsketch.DDSketch
}

// viewInflight merges window w's in-flight halves that now still covers
// into into. The caller holds r.mu.
func (r *row) viewInflight(w Window, now int64, into *AggregateRow) {
	cur := floorDiv(now, inflightHalf(w))
	for i := range r.inflight[w] {
		sl := &r.inflight[w][i]
		if sl.epoch == noEpoch || sl.epoch > cur || sl.epoch <= cur-inflightHalves {
			continue
		}
		for b := range sl.sketches {
			into.inflight[b].requests += sl.requests[b]
			mergeSketches(into.inflight[b].sketches[:], sl.sketches[b][:], newInflightViewSketch)
		}
	}
}
