package otelexport

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"

	"github.com/tokentap/tokentap/internal/meter"
)

// gen_ai.client.operation.time_per_output_chunk has a point per chunk
// after the first (the conventions' definition), dozens per request, and
// the SDK's Record normalises the attribute set and updates each reader's
// aggregation once per point: on a stream that would be most of the metric
// sink's cost (BenchmarkRecordMetrics measures the sink). The meter already
// keeps a request's gaps bucketed on this histogram's own boundaries, so with
// explicit buckets (the default) tokentap aggregates the histogram itself,
// one update per request, and hands it to every reader as an SDK metric
// Producer. The data points are those the SDK would make of the same
// points (TestChunkGapsProducerMatchesSDK). With exponential histograms
// (histogramAggregationEnv) the points go through the SDK, since
// only the SDK's aggregation can place them on its exponential scale.

// gapPoints calls fn for the points recordChunkGaps records of a request's
// gaps: each bucket's gaps at their mean (to the nanosecond, the remainder
// spread one nanosecond up so that the points add up to the bucket's sum),
// and the largest gap as itself, so that the sum, the count, every bucket
// count and the maximum are exact. n is how many points have value v; max
// marks the largest gap's point.
func gapPoints(g *meter.ChunkGaps, maxGap time.Duration, fn func(bucket int, v time.Duration, n int64, max bool)) {
	top := -1
	for i := len(g.Count) - 1; i >= 0; i-- {
		if g.Count[i] > 0 {
			top = i
			break
		}
	}
	for i := 0; i <= top; i++ {
		n, sum := int64(g.Count[i]), g.Sum[i]
		if n == 0 {
			continue
		}
		if i == top && maxGap > 0 && maxGap <= sum {
			fn(i, maxGap, 1, true)
			n, sum = n-1, sum-maxGap
		}
		if n == 0 {
			continue
		}
		mean := sum / time.Duration(n)
		up := int64(sum - mean*time.Duration(n))
		if up > 0 {
			fn(i, mean+1, up, false)
		}
		fn(i, mean, n-up, false)
	}
}

// recordChunkGaps records a request's gaps through the SDK, one Record per
// point: the path for exponential histograms. Only the largest gap is
// recorded in ctx, the exchange's span: a bucket's exemplar then points at
// a request whose worst gap fell there (a stall), and the other points skip
// the exemplar reservoir.
func recordChunkGaps(ctx context.Context, h metric.Float64Histogram, g *meter.ChunkGaps, maxGap time.Duration, opts []metric.RecordOption) {
	bulk := context.Background()
	gapPoints(g, maxGap, func(_ int, v time.Duration, n int64, max bool) {
		c := bulk
		if max {
			c = ctx
		}
		s := v.Seconds()
		for range n {
			h.Record(c, s, opts...)
		}
	})
}

// gapHistogram is time_per_output_chunk aggregated by tokentap: one
// cumulative aggregation that every cumulative reader (Caddy's /metrics,
// OTLP by default) shares, and one per reader that wants deltas, since a
// delta is taken from its reader's previous collection.
type gapHistogram struct {
	scope       instrumentation.Scope
	start       time.Time
	limit       int
	filter      exemplar.Filter
	cumulative  *gapAggregation
	deltas      []*gapAggregation
	name, unit  string
	description string
}

// newGapHistogram reads the two settings the SDK would have applied to
// this histogram from the environment: the exemplar filter and the
// cardinality limit.
func newGapHistogram() *gapHistogram {
	var inst genaiconv.ClientOperationTimePerOutputChunk
	h := &gapHistogram{
		scope:       instrumentation.Scope{Name: InstrumentationName, Version: Version(), SchemaURL: SchemaURL},
		start:       time.Now(),
		limit:       gapCardinalityLimit(),
		filter:      exemplarFilter(),
		name:        inst.Name(),
		unit:        inst.Unit(),
		description: inst.Description(),
	}
	h.cumulative = h.newAggregation(metricdata.CumulativeTemporality)
	return h
}

// producer returns the Producer for a reader of the given temporality.
// Delta readers each get an aggregation of their own; call it while the
// pipeline is built, before anything is recorded.
func (h *gapHistogram) producer(t metricdata.Temporality) sdkmetric.Producer {
	if t != metricdata.DeltaTemporality {
		return h.cumulative
	}
	a := h.newAggregation(metricdata.DeltaTemporality)
	h.deltas = append(h.deltas, a)
	return a
}

func (h *gapHistogram) newAggregation(t metricdata.Temporality) *gapAggregation {
	a := &gapAggregation{h: h, temporality: t, start: h.start}
	a.series.Store(&gapSeriesSet{})
	return a
}

// gapSummary is what one request adds to a series: its points, folded.
type gapSummary struct {
	counts   [meter.ChunkGapBuckets]uint64
	count    uint64
	sum      time.Duration
	min, max time.Duration
	// maxGap is the largest gap's point, offered to the exemplar
	// reservoir; maxBucket its bucket, -1 for none.
	maxGap    time.Duration
	maxBucket int
}

// record adds one request's gaps to every aggregation. set is the
// request's attribute set, ctx its span's context (for the exemplar).
func (h *gapHistogram) record(ctx context.Context, set attribute.Set, g *meter.ChunkGaps, maxGap time.Duration) {
	s := gapSummary{min: -1, maxBucket: -1}
	gapPoints(g, maxGap, func(bucket int, v time.Duration, n int64, max bool) {
		s.counts[bucket] += uint64(n)
		s.count += uint64(n)
		s.sum += v * time.Duration(n)
		if s.min < 0 || v < s.min {
			s.min = v
		}
		if v > s.max {
			s.max = v
		}
		if max {
			s.maxGap, s.maxBucket = v, bucket
		}
	})
	if s.count == 0 {
		return
	}
	offer := s.maxBucket >= 0 && h.filter(ctx)
	now := time.Now()
	h.cumulative.add(ctx, set, &s, offer, now)
	for _, d := range h.deltas {
		d.add(ctx, set, &s, offer, now)
	}
}

// gapAggregation is one temporality's series, by attribute set. A series
// has a lock of its own, held for one request's additions at the
// request's end (never per event), and by a collection.
type gapAggregation struct {
	h           *gapHistogram
	temporality metricdata.Temporality
	// series are the series since the start: for delta, since the
	// previous collection, which starts a new set (so the cardinality
	// limit applies per collection, as the SDK's does).
	series atomic.Pointer[gapSeriesSet]

	// collectMu serialises collections; start is when the points being
	// collected began: the histogram's start for cumulative, the previous
	// collection for delta.
	collectMu sync.Mutex
	start     time.Time
}

type gapSeriesSet struct {
	m        sync.Map // attribute.Distinct -> *gapSeries
	mu       sync.Mutex
	n        int // series in m, under mu
	overflow *gapSeries
	// closed: a delta collection has taken the set; no series is added
	// to it after, so that none escapes the collection.
	closed bool
}

type gapSeries struct {
	attrs attribute.Set

	mu sync.Mutex
	// stale: a delta collection has taken this series and its set; a
	// request that found it before then adds to the next set instead.
	stale    bool
	counts   [meter.ChunkGapBuckets]uint64
	count    uint64
	sum      time.Duration
	min, max time.Duration
	res      *exemplar.HistogramReservoir
}

// overflowSet is the SDK's attribute set for measurements past the
// cardinality limit.
var overflowSet = attribute.NewSet(attribute.Bool("otel.metric.overflow", true))

// lookup returns the series of set, creating it, or the overflow series
// past the limit (as the SDK does: limit-1 series and the overflow); nil
// if the set is closed and has no such series.
func (ss *gapSeriesSet) lookup(set attribute.Set, limit int) *gapSeries {
	key := set.Equivalent()
	if s, ok := ss.m.Load(key); ok {
		return s.(*gapSeries)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s, ok := ss.m.Load(key); ok {
		return s.(*gapSeries)
	}
	if ss.closed {
		return nil
	}
	if limit > 0 && ss.n >= limit-1 {
		if ss.overflow == nil {
			ss.overflow = newGapSeries(overflowSet)
		}
		return ss.overflow
	}
	s := newGapSeries(set)
	ss.m.Store(key, s)
	ss.n++
	return s
}

func newGapSeries(set attribute.Set) *gapSeries {
	return &gapSeries{attrs: set, res: exemplar.NewHistogramReservoir(durationBuckets)}
}

func (a *gapAggregation) add(ctx context.Context, set attribute.Set, s *gapSummary, offer bool, now time.Time) {
	for {
		ser := a.series.Load().lookup(set, a.h.limit)
		if ser == nil {
			continue
		}
		ser.mu.Lock()
		if ser.stale {
			ser.mu.Unlock()
			continue
		}
		for i, c := range s.counts {
			ser.counts[i] += c
		}
		if ser.count == 0 || s.min < ser.min {
			ser.min = s.min
		}
		if ser.count == 0 || s.max > ser.max {
			ser.max = s.max
		}
		ser.count += s.count
		ser.sum += s.sum
		if offer {
			ser.res.Offer(ctx, now, exemplar.NewValue(s.maxGap.Seconds()), nil)
		}
		ser.mu.Unlock()
		return
	}
}

// Produce returns the histogram's data points: every series for
// cumulative, the series measured since the previous collection for delta.
func (a *gapAggregation) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	a.collectMu.Lock()
	defer a.collectMu.Unlock()
	delta := a.temporality == metricdata.DeltaTemporality
	ss := a.series.Load()
	if delta {
		a.series.Store(&gapSeriesSet{})
		ss.mu.Lock()
		ss.closed = true
		ss.mu.Unlock()
	}
	now := time.Now()
	bounds := slices.Clone(durationBuckets)
	var points []metricdata.HistogramDataPoint[float64]
	collect := func(s *gapSeries) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.stale = delta
		if s.count == 0 {
			return
		}
		p := metricdata.HistogramDataPoint[float64]{
			Attributes:   s.attrs,
			StartTime:    a.start,
			Time:         now,
			Count:        s.count,
			Bounds:       bounds,
			BucketCounts: slices.Clone(s.counts[:]),
			Min:          metricdata.NewExtrema(s.min.Seconds()),
			Max:          metricdata.NewExtrema(s.max.Seconds()),
			Sum:          s.sum.Seconds(),
		}
		var ex []exemplar.Exemplar
		s.res.Collect(&ex)
		for _, e := range ex {
			p.Exemplars = append(p.Exemplars, metricdata.Exemplar[float64]{
				FilteredAttributes: e.FilteredAttributes,
				Time:               e.Time,
				Value:              e.Value.Float64(),
				SpanID:             e.SpanID,
				TraceID:            e.TraceID,
			})
		}
		points = append(points, p)
	}
	ss.m.Range(func(_, v any) bool {
		collect(v.(*gapSeries))
		return true
	})
	ss.mu.Lock()
	overflow := ss.overflow
	ss.mu.Unlock()
	if overflow != nil {
		collect(overflow)
	}
	if delta {
		a.start = now
	}
	if len(points) == 0 {
		return nil, nil
	}
	return []metricdata.ScopeMetrics{{
		Scope: a.h.scope,
		Metrics: []metricdata.Metrics{{
			Name:        a.h.name,
			Description: a.h.description,
			Unit:        a.h.unit,
			Data: metricdata.Histogram[float64]{
				DataPoints:  points,
				Temporality: a.temporality,
			},
		}},
	}}, nil
}

// exemplarFilter reads OTEL_METRICS_EXEMPLAR_FILTER as the SDK does:
// trace_based (the default), always_on or always_off.
func exemplarFilter() exemplar.Filter {
	switch strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_METRICS_EXEMPLAR_FILTER"))) {
	case "always_on":
		return exemplar.AlwaysOnFilter
	case "always_off":
		return exemplar.AlwaysOffFilter
	}
	return exemplar.TraceBasedFilter
}

// gapCardinalityLimit is the SDK's limit of series per instrument: 2000,
// or OTEL_GO_X_CARDINALITY_LIMIT (zero or less: none).
func gapCardinalityLimit() int {
	if n, err := strconv.Atoi(strings.TrimSpace(os.Getenv("OTEL_GO_X_CARDINALITY_LIMIT"))); err == nil {
		return n
	}
	return 2000
}
