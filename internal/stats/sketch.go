package stats

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/pb/sketchpb"
	"github.com/DataDog/sketches-go/ddsketch/store"
	"google.golang.org/protobuf/proto"
)

// RelativeAccuracy is the sketches' relative accuracy: a quantile is within
// 1 % of the value of the request at that rank. The acceptance bound on
// reported percentiles (2 %) leaves the other 1 % to timing noise.
const RelativeAccuracy = 0.01

// MaxBins bounds each time slice's sketch: 256 bins of 8 bytes cover
// values that span gamma^255 at 1 % (gamma = 1.01/0.99; docs/live-stats.md,
// "Accuracy", gives the spread).
const MaxBins = 256

// indexMapping is shared by every sketch, so that any two merge.
var indexMapping = func() *mapping.LogarithmicMapping {
	m, err := mapping.NewLogarithmicMapping(RelativeAccuracy)
	if err != nil {
		panic(err) // a constant accuracy in (0, 1) cannot fail
	}
	return m
}()

// The bin indexes that valid values map to; a snapshot carrying others was
// not made by this package.
var (
	minIndex = indexMapping.Index(minValue)
	maxIndex = indexMapping.Index(maxValue)
)

// Templates spanning exactly MaxBins indexes: merging one into an empty
// store makes the store allocate its bins once, at full size, so that it
// never grows (and never allocates) again.
var (
	lowestTemplate  = fullStore(store.NewCollapsingLowestDenseStore(MaxBins), MaxBins)
	highestTemplate = fullStore(store.NewCollapsingHighestDenseStore(MaxBins), MaxBins)
)

func fullStore(s store.Store, bins int) store.Store {
	s.Add(0)
	s.Add(bins - 1)
	return s
}

// newSliceSketch returns the bounded sketch of one metric in one time
// slice, its bins allocated at full size.
func newSliceSketch(m Metric) *ddsketch.DDSketch {
	return newBoundedSketch(indexMapping, MaxBins, lowestTemplate, highestTemplate, metrics[m].slowTailLow)
}

// newBoundedSketch returns a sketch of bins bins at most, allocated at
// full size from a template, so that adding never allocates: a full
// sketch collapses its highest bins when low values are the bad tail
// (throughput), else its lowest.
func newBoundedSketch(m mapping.IndexMapping, bins int, lowest, highest store.Store, slowTailLow bool) *ddsketch.DDSketch {
	var pos, neg store.Store
	if slowTailLow {
		pos = store.NewCollapsingHighestDenseStore(bins)
		pos.MergeWith(highest)
		neg = store.NewCollapsingHighestDenseStore(bins)
	} else {
		pos = store.NewCollapsingLowestDenseStore(bins)
		pos.MergeWith(lowest)
		neg = store.NewCollapsingLowestDenseStore(bins)
	}
	pos.Clear()
	// neg stays without bins: values are never negative.
	return ddsketch.NewDDSketch(m, pos, neg)
}

// newViewSketch returns a sketch for a merged view: unbounded, since it
// lives only for one query and holds at most the index range of valid
// values.
func newViewSketch() *ddsketch.DDSketch {
	return ddsketch.NewDDSketch(indexMapping, store.NewDenseStore(), store.NewDenseStore())
}

// encodeSketch returns the sketch as base64 of sketches-go's protobuf.
func encodeSketch(s *ddsketch.DDSketch) (string, error) {
	b, err := proto.Marshal(s.ToProto())
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// sketchProto appends the sketch in sketches-go's protobuf form to b.
func sketchProto(b []byte, s *ddsketch.DDSketch) ([]byte, error) {
	return proto.MarshalOptions{}.MarshalAppend(b, s.ToProto())
}

// decodeSketch reads a sketch written by encodeSketch, here or in another
// instance, and checks that it can merge with this package's sketches and
// holds only what valid values produce, so that a hostile or corrupt
// snapshot cannot make the reader allocate without bound.
func decodeSketch(s string) (*ddsketch.DDSketch, error) {
	return decodeSketchOf(s, &sliceSketches)
}

// sketchKind is what a decoded sketch must match: its mapping, the bin
// indexes valid values map to under it, and the view sketch to read it
// into.
type sketchKind struct {
	mapping            *mapping.LogarithmicMapping
	minIndex, maxIndex int
	view               func() *ddsketch.DDSketch
}

var (
	sliceSketches    = sketchKind{indexMapping, minIndex, maxIndex, newViewSketch}
	inflightSketches = sketchKind{inflightMapping, inflightMapping.Index(minValue), inflightMapping.Index(maxValue), newInflightViewSketch}
	strataSketches   = sketchKind{strataMapping, strataMapping.Index(minValue), strataMapping.Index(maxValue), newStrataViewSketch}
)

func decodeSketchOf(s string, kind *sketchKind) (*ddsketch.DDSketch, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not base64: %v", err)
	}
	return decodeSketchProto(b, kind, kind.view)
}

// decodeSketchProto reads a sketch in sketches-go's protobuf form, with
// the checks decodeSketch describes, into a sketch that into makes.
func decodeSketchProto(b []byte, kind *sketchKind, into func() *ddsketch.DDSketch) (*ddsketch.DDSketch, error) {
	var pb sketchpb.DDSketch
	if err := proto.Unmarshal(b, &pb); err != nil {
		return nil, fmt.Errorf("not a DDSketch protobuf: %v", err)
	}
	m, err := mapping.FromProto(pb.Mapping)
	if err != nil {
		return nil, err
	}
	if !kind.mapping.Equals(m) {
		return nil, fmt.Errorf("relative accuracy %.3g, want %.3g: the instances run different tokentap versions", m.RelativeAccuracy(), kind.mapping.RelativeAccuracy())
	}
	if !validCount(pb.ZeroCount) {
		return nil, fmt.Errorf("bad zero count %v", pb.ZeroCount)
	}
	if err := checkStore(pb.NegativeValues, true, kind); err != nil {
		return nil, err
	}
	if err := checkStore(pb.PositiveValues, false, kind); err != nil {
		return nil, err
	}
	sk := into()
	if pb.PositiveValues != nil {
		store.MergeWithProto(sk.GetPositiveValueStore(), pb.PositiveValues)
	}
	if pb.ZeroCount > 0 {
		if err := sk.AddWithCount(0, pb.ZeroCount); err != nil {
			return nil, err
		}
	}
	return sk, nil
}

func validCount(c float64) bool { return c >= 0 && !math.IsInf(c, 0) && !math.IsNaN(c) }

// checkStore checks a protobuf store's bins: indexes that valid values map
// to, finite non-negative counts, and none at all for negative values.
func checkStore(s *sketchpb.Store, negative bool, kind *sketchKind) error {
	minIndex, maxIndex := kind.minIndex, kind.maxIndex
	if s == nil {
		return nil
	}
	nonEmpty := false
	for idx, c := range s.BinCounts {
		if !validCount(c) {
			return fmt.Errorf("bad bin count %v", c)
		}
		if int(idx) < minIndex || int(idx) > maxIndex {
			return fmt.Errorf("bin index %d out of range [%d, %d]", idx, minIndex, maxIndex)
		}
		nonEmpty = nonEmpty || c > 0
	}
	if n := len(s.ContiguousBinCounts); n > 0 {
		lo := int(s.ContiguousBinIndexOffset)
		if lo < minIndex || lo+n-1 > maxIndex {
			return fmt.Errorf("bins [%d, %d] out of range [%d, %d]", lo, lo+n-1, minIndex, maxIndex)
		}
		for _, c := range s.ContiguousBinCounts {
			if !validCount(c) {
				return fmt.Errorf("bad bin count %v", c)
			}
			nonEmpty = nonEmpty || c > 0
		}
	}
	if negative && nonEmpty {
		return errors.New("negative values: tokentap records none")
	}
	return nil
}
