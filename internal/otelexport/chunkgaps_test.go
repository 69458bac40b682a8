package otelexport

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/testutil/measuretest"
)

// manualOptions turns the options a MetricReadersOverride is given into a
// ManualReader's.
func manualOptions(opts []sdkmetric.ReaderOption) []sdkmetric.ManualReaderOption {
	out := make([]sdkmetric.ManualReaderOption, len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

// TestChunkGapBoundsAreTheHistograms: the meter's gap buckets are the
// histogram's, bound for bound, which is what lets a request's bucket
// counts go to the histogram as they are.
func TestChunkGapBoundsAreTheHistograms(t *testing.T) {
	if len(durationBuckets) != meter.ChunkGapBuckets-1 {
		t.Fatalf("%d bounds, the meter has %d buckets", len(durationBuckets), meter.ChunkGapBuckets)
	}
	for i, b := range durationBuckets {
		if got := meter.ChunkGapBound(i).Seconds(); got != b {
			t.Errorf("bound %d: the meter's %v s, the histogram's %v s", i, got, b)
		}
	}
}

// TestChunkGapsProducerMatchesSDK: the histogram tokentap aggregates
// itself has, for the same requests, the data points the SDK makes of the
// points recordChunkGaps records one by one: counts, bucket counts, sum,
// min, max and exemplars, per attribute set, cumulative and delta, past
// the cardinality limit, and with exemplars off.
func TestChunkGapsProducerMatchesSDK(t *testing.T) {
	tests := []struct {
		name  string
		delta bool
		env   map[string]string
	}{
		{"cumulative", false, nil},
		{"delta", true, nil},
		{"past the cardinality limit", false, map[string]string{"OTEL_GO_X_CARDINALITY_LIMIT": "4"}},
		{"delta past the cardinality limit", true, map[string]string{"OTEL_GO_X_CARDINALITY_LIMIT": "3"}},
		{"exemplars off", false, map[string]string{"OTEL_METRICS_EXEMPLAR_FILTER": "always_off"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			temporality := metricdata.CumulativeTemporality
			if tt.delta {
				temporality = metricdata.DeltaTemporality
			}
			selector := sdkmetric.WithTemporalitySelector(func(sdkmetric.InstrumentKind) metricdata.Temporality { return temporality })

			sdkReader := sdkmetric.NewManualReader(selector)
			sdkMP := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkReader))
			t.Cleanup(func() { _ = sdkMP.Shutdown(context.Background()) })
			viaSDK, err := newMetricInstruments(sdkMP, true, nil)
			if err != nil {
				t.Fatal(err)
			}
			gaps := newGapHistogram()
			ownReader := sdkmetric.NewManualReader(selector, sdkmetric.WithProducer(gaps.producer(temporality)))
			ownMP := sdkmetric.NewMeterProvider(sdkmetric.WithReader(ownReader))
			t.Cleanup(func() { _ = ownMP.Shutdown(context.Background()) })
			own, err := newMetricInstruments(ownMP, true, gaps)
			if err != nil {
				t.Fatal(err)
			}

			sampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
			unsampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
			rng := rand.New(rand.NewPCG(16, 7))
			// The exemplars each bucket may hold: the reservoir picks
			// among them at random, so the two sides are compared by
			// which buckets have one and whether each is a real
			// request's largest gap.
			candidates := map[candidate]bool{}
			for batch := range 3 {
				// The third batch records nothing: a delta then has no
				// points, a cumulative the same as before.
				n := []int{300, 200, 0}[batch]
				for i := range n {
					tp := sampled
					if rng.IntN(3) == 0 {
						tp = unsampled
					}
					ctx, span := tp.Tracer("t").Start(context.Background(), "chat")
					r := randomGapResult(rng, ctx, i)
					if sc := span.SpanContext(); sc.IsSampled() && r.M.MaxChunkGap > 0 {
						candidates[candidate{r.M.MaxChunkGap.Seconds(), sc.TraceID().String(), sc.SpanID().String()}] = true
					}
					viaSDK.Record(r)
					own.Record(r)
					span.End()
				}
				want := chunkGapPoints(t, sdkReader)
				got := chunkGapPoints(t, ownReader)
				if n > 0 && len(want) == 0 {
					t.Fatalf("batch %d: the SDK made no points", batch)
				}
				compareGapPoints(t, fmt.Sprintf("batch %d", batch), got, want, candidates)
			}
		})
	}
}

// randomGapResult is a streamed exchange of one of six attribute sets with
// 0 to 60 gaps spread over every bucket, a stall now and then.
func randomGapResult(rng *rand.Rand, ctx context.Context, i int) *sink.Result {
	m := measuretest.Streamed()
	m.Request.Model = []string{"a", "b", "c"}[rng.IntN(3)]
	m.ChunkGaps, m.MaxChunkGap = meter.ChunkGaps{}, 0
	n := rng.IntN(61)
	for range n {
		g := time.Duration(rng.Int64N(int64(40*time.Millisecond))) + time.Microsecond
		if rng.IntN(20) == 0 {
			g = time.Duration(rng.Int64N(int64(100 * time.Second)))
		}
		b := 0
		for b < meter.ChunkGapBuckets-1 && g > meter.ChunkGapBound(b) {
			b++
		}
		m.ChunkGaps.Count[b]++
		m.ChunkGaps.Sum[b] += g
		m.MaxChunkGap = max(m.MaxChunkGap, g)
	}
	m.Chunks = int64(n + 1)
	if i%17 == 0 {
		// A measurement without its largest gap (as when no gap was
		// timed alone): every point at its bucket's mean.
		m.MaxChunkGap = 0
	}
	return &sink.Result{Ctx: ctx, M: m, Provider: []string{"openai", "anthropic"}[rng.IntN(2)]}
}

// chunkGapPoints collects the chunk-gap histogram's points by attribute set.
func chunkGapPoints(t *testing.T, r *sdkmetric.ManualReader) map[attribute.Distinct]metricdata.HistogramDataPoint[float64] {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[attribute.Distinct]metricdata.HistogramDataPoint[float64]{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "gen_ai.client.operation.time_per_output_chunk" {
				continue
			}
			if sm.Scope.Name != InstrumentationName || sm.Scope.SchemaURL != SchemaURL || sm.Scope.Version != Version() {
				t.Errorf("scope %+v", sm.Scope)
			}
			if m.Unit != "s" || m.Description == "" {
				t.Errorf("unit %q, description %q", m.Unit, m.Description)
			}
			for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				if _, dup := out[p.Attributes.Equivalent()]; dup {
					t.Errorf("two points for %v", p.Attributes.ToSlice())
				}
				out[p.Attributes.Equivalent()] = p
			}
		}
	}
	return out
}

// candidate is an exemplar a request could have left.
type candidate struct {
	v           float64
	trace, span string
}

func compareGapPoints(t *testing.T, what string, got, want map[attribute.Distinct]metricdata.HistogramDataPoint[float64], candidates map[candidate]bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d series, the SDK %d", what, len(got), len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		name := fmt.Sprintf("%s %v", what, w.Attributes.ToSlice())
		if !ok {
			t.Errorf("%s: missing", name)
			continue
		}
		gmin, _ := g.Min.Value()
		wmin, _ := w.Min.Value()
		gmax, _ := g.Max.Value()
		wmax, _ := w.Max.Value()
		if g.Count != w.Count || !slices.Equal(g.Bounds, w.Bounds) || !slices.Equal(g.BucketCounts, w.BucketCounts) || gmin != wmin || gmax != wmax {
			t.Errorf("%s: count %d buckets %v min %v max %v, the SDK %d %v %v %v", name, g.Count, g.BucketCounts, gmin, gmax, w.Count, w.BucketCounts, wmin, wmax)
		}
		if math.Abs(g.Sum-w.Sum) > 1e-9*max(1, math.Abs(w.Sum)) {
			t.Errorf("%s: sum %v, the SDK %v", name, g.Sum, w.Sum)
		}
		if !g.Time.After(g.StartTime) {
			t.Errorf("%s: time %v not after the start %v", name, g.Time, g.StartTime)
		}
		buckets := func(es []metricdata.Exemplar[float64]) []int {
			var out []int
			for _, e := range es {
				out = append(out, sort.SearchFloat64s(durationBuckets, e.Value))
			}
			slices.Sort(out)
			return out
		}
		if gb, wb := buckets(g.Exemplars), buckets(w.Exemplars); !slices.Equal(gb, wb) {
			t.Errorf("%s: exemplars in buckets %v, the SDK's in %v", name, gb, wb)
		}
		for _, e := range g.Exemplars {
			c := candidate{e.Value, fmt.Sprintf("%x", e.TraceID), fmt.Sprintf("%x", e.SpanID)}
			if !candidates[c] {
				t.Errorf("%s: exemplar %+v is no sampled request's largest gap", name, c)
			}
		}
	}
}

// TestChunkGapsOnEveryReader: the pipeline hands the histogram to Caddy's
// /metrics and to its push readers, and leaves it to the SDK when the
// histograms are exponential.
func TestChunkGapsOnEveryReader(t *testing.T) {
	for _, tt := range []struct {
		name        string
		aggregation string
		own         bool
	}{
		{"explicit buckets: tokentap's aggregation", "", true},
		{"exponential: the SDK's", "base2_exponential_bucket_histogram", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			withoutMetricReadersOverride(t)
			t.Setenv(histogramAggregationEnv, tt.aggregation)
			var push *sdkmetric.ManualReader
			MetricReadersOverride = func(opts ...sdkmetric.ReaderOption) []sdkmetric.Reader {
				push = sdkmetric.NewManualReader(manualOptions(opts)...)
				return []sdkmetric.Reader{push}
			}
			p, release, err := AcquireMeterProvider(context.Background(), zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			if (p.Instruments.gaps != nil) != tt.own {
				t.Fatalf("own aggregation %v, want %v", p.Instruments.gaps != nil, tt.own)
			}
			m := measuretest.Streamed()
			p.Instruments.Record(&sink.Result{Ctx: context.Background(), M: m, Provider: "gaps-test"})
			var rm metricdata.ResourceMetrics
			if err := push.Collect(context.Background(), &rm); err != nil {
				t.Fatal(err)
			}
			var count uint64
			found := 0
			for _, sm := range rm.ScopeMetrics {
				for _, mt := range sm.Metrics {
					if mt.Name != "gen_ai.client.operation.time_per_output_chunk" {
						continue
					}
					found++
					switch d := mt.Data.(type) {
					case metricdata.Histogram[float64]:
						count += d.DataPoints[0].Count
					case metricdata.ExponentialHistogram[float64]:
						count += d.DataPoints[0].Count
					}
				}
			}
			if found != 1 || count != uint64(m.ChunkGaps.Total()) {
				t.Errorf("%d time_per_output_chunk metrics with %d points, want one with %d", found, count, m.ChunkGaps.Total())
			}
			// Caddy's /metrics reads the same aggregation, a pedantic
			// registry its exposition.
			reg := prometheus.NewPedanticRegistry()
			defer p.Register(reg, zap.NewNop())()
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatalf("gather: %v", err)
			}
			fam := findFamily(mfs, "gen_ai_client_operation_time_per_output_chunk_seconds")
			if fam == nil || len(fam.GetMetric()) != 1 || fam.GetMetric()[0].GetHistogram().GetSampleCount() != uint64(m.ChunkGaps.Total()) {
				t.Errorf("/metrics: %v, want one series of %d gaps", fam, m.ChunkGaps.Total())
			}
		})
	}
}

// TestChunkGapsConcurrentCollections: requests recorded while delta and
// cumulative readers collect are each counted once: the deltas add up to
// every gap recorded, and so does the cumulative's last collection.
func TestChunkGapsConcurrentCollections(t *testing.T) {
	t.Setenv("OTEL_GO_X_CARDINALITY_LIMIT", "3") // series come and go past the limit too
	gaps := newGapHistogram()
	delta := gaps.producer(metricdata.DeltaTemporality)
	cumulative := gaps.producer(metricdata.CumulativeTemporality)
	const workers, perWorker = 4, 2000
	m := measuretest.Streamed()
	sets := []attribute.Set{
		attribute.NewSet(attribute.String("m", "a")),
		attribute.NewSet(attribute.String("m", "b")),
		attribute.NewSet(attribute.String("m", "c")),
	}
	count := func(sms []metricdata.ScopeMetrics) uint64 {
		var n uint64
		for _, sm := range sms {
			for _, mt := range sm.Metrics {
				for _, p := range mt.Data.(metricdata.Histogram[float64]).DataPoints {
					n += p.Count
				}
			}
		}
		return n
	}
	done := make(chan struct{})
	var deltas uint64
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for {
			select {
			case <-done:
				sms, _ := delta.Produce(context.Background())
				deltas += count(sms)
				return
			default:
			}
			sms, _ := delta.Produce(context.Background())
			deltas += count(sms)
			_, _ = cumulative.Produce(context.Background())
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				gaps.record(context.Background(), sets[(w+i)%len(sets)], &m.ChunkGaps, m.MaxChunkGap)
			}
		})
	}
	wg.Wait()
	close(done)
	<-collected
	want := uint64(workers*perWorker) * uint64(m.ChunkGaps.Total())
	if deltas != want {
		t.Errorf("the deltas add up to %d gaps, want %d", deltas, want)
	}
	sms, _ := cumulative.Produce(context.Background())
	if got := count(sms); got != want {
		t.Errorf("the cumulative has %d gaps, want %d", got, want)
	}
}

// TestChunkGapsDeltaHandover: a series a request found just before a delta
// collection took it is stale after it, and the request's gaps go to the
// next collection, not to the series already reported.
func TestChunkGapsDeltaHandover(t *testing.T) {
	gaps := newGapHistogram()
	delta := gaps.producer(metricdata.DeltaTemporality).(*gapAggregation)
	m := measuretest.Streamed()
	set := attribute.NewSet(attribute.String("m", "a"))
	gaps.record(context.Background(), set, &m.ChunkGaps, m.MaxChunkGap)
	found := delta.series.Load().lookup(set, 0) // what a request about to add holds
	old := delta.series.Load()
	if _, err := delta.Produce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !found.stale {
		t.Error("the collected series is not stale")
	}
	if old.lookup(attribute.NewSet(attribute.String("m", "new")), 0) != nil {
		t.Error("the collected set still takes new series")
	}
	reported := found.count
	gaps.record(context.Background(), set, &m.ChunkGaps, m.MaxChunkGap)
	if found.count != reported {
		t.Errorf("%d gaps added to the collected series", found.count-reported)
	}
	sms, _ := delta.Produce(context.Background())
	if len(sms) != 1 || sms[0].Metrics[0].Data.(metricdata.Histogram[float64]).DataPoints[0].Count != uint64(m.ChunkGaps.Total()) {
		t.Errorf("the next collection: %+v, want the %d gaps", sms, m.ChunkGaps.Total())
	}
}
