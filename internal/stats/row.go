package stats

import (
	"sync"

	"github.com/DataDog/sketches-go/ddsketch"

	"github.com/tokentap/tokentap/internal/drift"
)

// Counts are a row's request counters in a slice or a window.
type Counts struct {
	// Requests counts every finished request, failed ones included.
	Requests int64
	// Errors counts outcome upstream_error.
	Errors int64
	// Aborts counts outcome client_abort.
	Aborts int64
	// Throttled counts outcome throttled, apart from Errors.
	Throttled int64
	// Estimated counts requests whose token counts were estimated.
	Estimated int64
	// CostUSD sums the cost of the requests that had one. A sum rather
	// than a sketch's estimate, so that a row's total is the bill's.
	CostUSD float64
	// SLORequests counts the requests an objective judged, SLOMet those
	// that met it, and GoodputTokens sums the output tokens of those.
	SLORequests, SLOMet, GoodputTokens int64
	// Buffered counts streams that arrived held back and released in one
	// burst (meter.Measurement.Buffered).
	Buffered int64
	// UsageVerified counts the requests verify_usage compared, and
	// UsageReported and UsageCounted sum their reported and counted
	// output tokens (sums, so that a row's ratio is exact and merges);
	// UsageMismatches counts those outside the tolerance.
	UsageVerified, UsageReported, UsageCounted, UsageMismatches int64
}

func (c *Counts) add(o Counts) {
	c.Requests += o.Requests
	c.Errors += o.Errors
	c.Aborts += o.Aborts
	c.Throttled += o.Throttled
	c.Estimated += o.Estimated
	c.CostUSD += o.CostUSD
	c.SLORequests += o.SLORequests
	c.SLOMet += o.SLOMet
	c.GoodputTokens += o.GoodputTokens
	c.Buffered += o.Buffered
	c.UsageVerified += o.UsageVerified
	c.UsageReported += o.UsageReported
	c.UsageCounted += o.UsageCounted
	c.UsageMismatches += o.UsageMismatches
}

// zeroIndex marks a zero value among bin indexes, which valid values keep
// far from.
const zeroIndex = -1 << 62

// noEpoch marks a slice that holds nothing.
const noEpoch = -1 << 63

// slice is one time slice of one window's ring.
type slice struct {
	// epoch is the slice's number: its start time since the store's origin
	// divided by the window's slice length.
	epoch  int64
	counts Counts
	// sketches are allocated when the slice first sees the metric, then
	// cleared and reused as the ring turns.
	sketches [NumMetrics]*ddsketch.DDSketch
}

// reset empties the slice for epoch e, keeping its sketches' memory.
func (s *slice) reset(e int64) {
	s.epoch = e
	s.counts = Counts{}
	for _, sk := range s.sketches {
		if sk != nil {
			sk.Clear()
		}
	}
}

// row is one key's rings.
type row struct {
	mu sync.Mutex
	// gen changes when the row is reused for another key, so that a
	// recorder that found the row under the old key looks again.
	gen uint64
	key Key
	// overflow is set on the one row that takes keys past the cap.
	overflow bool
	// last is when the row last recorded, in nanoseconds since the
	// store's origin; a row whose last record is older than the longest
	// window holds nothing and may be reused.
	last int64
	// rings holds each window's slices, all in one allocation.
	rings [numWindows][]slice
	// inflight holds each window's in-flight halves (inflight.go).
	inflight [numWindows][inflightHalves]inflightSlice
	// strata holds the 5m and 1h windows' cells of (in-flight level x
	// input size), from the first request that has one (strata.go).
	strata *rowStrata
	// health watches the row for a slowdown against its own earlier
	// requests (package drift).
	health drift.Detector
	// headroom is the latest rate limit state a response of the row
	// reported (headroom.go).
	headroom Headroom
	// next chains rows whose keys hash alike.
	next *row
}

func newRow(key Key, overflow bool) *row {
	r := &row{key: key, overflow: overflow}
	all := make([]slice, totalSlices)
	for i := range all {
		all[i].epoch = noEpoch
	}
	for w := range windows {
		r.rings[w], all = all[:windows[w].count:windows[w].count], all[windows[w].count:]
		for i := range r.inflight[w] {
			r.inflight[w][i].epoch = noEpoch
		}
	}
	return r
}

// record adds s at t (nanoseconds since the store's origin) to every
// window. It returns the values that fell outside the valid range, a
// measurement fault the store counts. The caller holds r.mu.
func (r *row) record(s *Sample, t int64) (invalid int) {
	// Each value's bin index is computed once (a logarithm) and added to
	// every window's sketch; -1 << 62 stands for zero, which sketches keep
	// in a bucket of its own.
	var ok [NumMetrics]bool
	var index [NumMetrics]int
	for m := range ok {
		if !s.observed[m] {
			continue
		}
		if ok[m] = valid(s.values[m]); !ok[m] {
			invalid++
			continue
		}
		if s.values[m] == 0 {
			index[m] = zeroIndex
		} else {
			index[m] = indexMapping.Index(s.values[m])
		}
	}
	if t > r.last {
		r.last = t
	}
	r.recordInflight(s, t, &ok)
	r.recordStrata(s, t, &ok)
	for w := range r.rings {
		info := &windows[w]
		e := floorDiv(t, int64(info.slice))
		sl := &r.rings[w][mod(e, info.count)]
		if sl.epoch != e {
			if sl.epoch > e {
				// Later requests have already turned the ring past this
				// request's slice: it is older than the window.
				continue
			}
			sl.reset(e)
		}
		sl.counts.Requests++
		if s.Error {
			sl.counts.Errors++
		}
		if s.Abort {
			sl.counts.Aborts++
		}
		if s.Throttled {
			sl.counts.Throttled++
		}
		if s.Estimated {
			sl.counts.Estimated++
		}
		if s.Buffered {
			sl.counts.Buffered++
		}
		if ok[Cost] {
			sl.counts.CostUSD += s.values[Cost]
		}
		if s.SLOJudged {
			sl.counts.SLORequests++
			if s.SLOMet {
				sl.counts.SLOMet++
				if ok[OutputTokens] {
					sl.counts.GoodputTokens += int64(s.values[OutputTokens])
				}
			}
		}
		if s.UsageVerified {
			sl.counts.UsageVerified++
			sl.counts.UsageReported += s.UsageReported
			sl.counts.UsageCounted += s.UsageCounted
			if s.UsageMismatch {
				sl.counts.UsageMismatches++
			}
		}
		for m := range ok {
			if !ok[m] {
				continue
			}
			sk := sl.sketches[m]
			if sk == nil {
				sk = newSliceSketch(Metric(m))
				sl.sketches[m] = sk
			}
			if index[m] == zeroIndex {
				// Zero is always trackable: Add cannot fail.
				_ = sk.Add(0)
			} else {
				sk.GetPositiveValueStore().Add(index[m])
			}
		}
	}
	return invalid
}

// idle reports whether every slice of the row has expired at now
// (nanoseconds since the origin): its last record is in a slice of the
// longest window that the window has left.
func (r *row) idle(now int64) bool {
	w := &windows[Window1h]
	return floorDiv(now, int64(w.slice))-floorDiv(r.last, int64(w.slice)) >= int64(w.count)
}

// initHealth starts the row's detector afresh with cfg (nil: the
// defaults). A cfg that does not validate, which provisioning prevents,
// leaves the defaults.
func (r *row) initHealth(cfg *drift.Config) {
	if cfg == nil || r.health.Init(*cfg) != nil {
		r.health = drift.Detector{}
	}
}

// reuse turns an idle row into key's row, keeping its slices' memory, with
// a fresh detector for cfg. The caller holds r.mu.
func (r *row) reuse(key Key, cfg *drift.Config) {
	r.gen++
	r.key = key
	r.last = 0
	r.headroom = Headroom{}
	for w := range r.rings {
		for i := range r.rings[w] {
			r.rings[w][i].reset(noEpoch)
		}
		for i := range r.inflight[w] {
			r.inflight[w][i].reset(noEpoch)
		}
	}
	r.resetStrata()
	r.initHealth(cfg)
}

// view merges the slices of window w that now (nanoseconds since the
// origin) still covers into into. The caller holds r.mu.
func (r *row) view(w Window, now int64, into *AggregateRow) {
	info := &windows[w]
	cur := floorDiv(now, int64(info.slice))
	for i := range r.rings[w] {
		sl := &r.rings[w][i]
		if sl.epoch == noEpoch || sl.epoch > cur || sl.epoch <= cur-int64(info.count) {
			continue
		}
		into.Counts.add(sl.counts)
		mergeSketches(into.sketches[:], sl.sketches[:], newViewSketch)
	}
}
