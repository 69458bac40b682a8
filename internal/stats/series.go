package stats

import (
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
)

// SeriesSlice is one time slice of a row's series: how the row's numbers
// moved within the window, which the window's merged view hides.
type SeriesSlice struct {
	// Start is when the slice began; it lasts the window's Slice().
	Start time.Time
	// Counts are the slice's requests, errors and the rest.
	Counts Counts
	// sketches are nil for metrics without a point in the slice.
	sketches [NumMetrics]*ddsketch.DDSketch
}

// Series is Aggregate with each row's series kept: every slice of the
// window, oldest first, empty ones included so that a chart's time axis
// has no holes.
func (s *Store) Series(w Window, now time.Time) *Aggregate {
	return s.aggregate(w, now, true)
}

// viewSeries copies the slices of window w that now (nanoseconds since the
// origin) covers into into.Series, one per slice of the window. The caller
// holds r.mu.
func (r *row) viewSeries(w Window, now int64, origin time.Time, into *AggregateRow) {
	info := &windows[w]
	cur := floorDiv(now, int64(info.slice))
	into.Series = make([]SeriesSlice, info.count)
	for i := range into.Series {
		e := cur - int64(info.count) + 1 + int64(i)
		ss := &into.Series[i]
		ss.Start = origin.Add(time.Duration(e * int64(info.slice)))
		sl := &r.rings[w][mod(e, info.count)]
		if sl.epoch != e {
			continue
		}
		ss.Counts = sl.counts
		for m, sk := range sl.sketches {
			if sk != nil && !sk.IsEmpty() {
				ss.sketches[m] = sk.Copy()
			}
		}
	}
}

// mergeSeries merges b into a, both sorted by start: slices that start
// together (instances whose slices line up, as default origins make them)
// merge their counts and sketches; others are kept side by side.
func mergeSeries(a, b []SeriesSlice) []SeriesSlice {
	out := make([]SeriesSlice, 0, max(len(a), len(b)))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i].Start.Before(b[j].Start):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].Start.Before(a[i].Start):
			out = append(out, copySlice(&b[j]))
			j++
		default:
			m := a[i]
			m.Counts.add(b[j].Counts)
			mergeSketches(m.sketches[:], b[j].sketches[:], newViewSketch)
			out = append(out, m)
			i, j = i+1, j+1
		}
	}
	return out
}

func copySlice(s *SeriesSlice) SeriesSlice {
	c := SeriesSlice{Start: s.Start, Counts: s.Counts}
	for m, sk := range s.sketches {
		if sk != nil {
			c.sketches[m] = sk.Copy()
		}
	}
	return c
}

// mergeSketches merges each of from's sketches into the sketch of the same
// index in into, making that one with view when it is nil. Every sketch of
// a kind shares one mapping (decodeSketch checks those from elsewhere), so
// merging cannot fail.
func mergeSketches(into, from []*ddsketch.DDSketch, view func() *ddsketch.DDSketch) {
	for i, sk := range from {
		if sk == nil || sk.IsEmpty() {
			continue
		}
		if into[i] == nil {
			into[i] = view()
		}
		_ = into[i].MergeWith(sk)
	}
}
