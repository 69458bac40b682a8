package otelexport

import (
	"context"
	"math"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/testutil/measuretest"
)

// newTestInstruments returns instruments on a MeterProvider of their own, read
// through a ManualReader, as the production pipeline builds them.
func newTestInstruments(t testing.TB) (*Instruments, *sdkmetric.ManualReader) {
	t.Helper()
	gaps := newGapHistogram()
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(gaps.producer(metricdata.CumulativeTemporality)))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	ins, err := newMetricInstruments(mp, true, gaps)
	if err != nil {
		t.Fatal(err)
	}
	return ins, reader
}

// spanContext returns a context inside a span of a real, sampling SDK
// tracer, as an exchange's is.
func metricSpanContext(t testing.TB, sampled bool) (context.Context, trace.SpanContext) {
	t.Helper()
	sampler := sdktrace.AlwaysSample()
	if !sampled {
		sampler = sdktrace.NeverSample()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("t").Start(context.Background(), "chat")
	t.Cleanup(func() { span.End() })
	return ctx, span.SpanContext()
}

// metricPoint is one collected histogram data point, flattened for comparison.
type metricPoint struct {
	attrs        map[string]any
	count        uint64
	sum          float64
	max          float64
	bounds       []float64
	bucketCounts []uint64
	exemplars    []metricdata.Exemplar[float64]
}

// collectedMetrics is what a ManualReader holds, by metric name.
type collectedMetrics struct {
	units  map[string]string
	descs  map[string]string
	points map[string][]metricPoint
}

func collectMetrics(t testing.TB, r *sdkmetric.ManualReader) collectedMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	c := collectedMetrics{units: map[string]string{}, descs: map[string]string{}, points: map[string][]metricPoint{}}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != InstrumentationName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, InstrumentationName)
		}
		for _, m := range sm.Metrics {
			c.units[m.Name], c.descs[m.Name] = m.Unit, m.Description
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					mx, _ := dp.Max.Value()
					c.points[m.Name] = append(c.points[m.Name], metricPoint{metricAttrMap(dp.Attributes), dp.Count, dp.Sum, mx, dp.Bounds, dp.BucketCounts, dp.Exemplars})
				}
			case metricdata.Histogram[int64]:
				for _, dp := range d.DataPoints {
					mx, _ := dp.Max.Value()
					var ex []metricdata.Exemplar[float64]
					for _, e := range dp.Exemplars {
						ex = append(ex, metricdata.Exemplar[float64]{Value: float64(e.Value), TraceID: e.TraceID, SpanID: e.SpanID})
					}
					c.points[m.Name] = append(c.points[m.Name], metricPoint{metricAttrMap(dp.Attributes), dp.Count, float64(dp.Sum), float64(mx), dp.Bounds, dp.BucketCounts, ex})
				}
			default:
				t.Errorf("%s is a %T, want a histogram", m.Name, m.Data)
			}
		}
	}
	return c
}

func metricAttrMap(s attribute.Set) map[string]any {
	m := map[string]any{}
	for _, kv := range s.ToSlice() {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

// TestMetricInstruments: every histogram has the name, unit and bucket
// boundaries of the conventions (or of docs/telemetry.md for tokentap's).
func TestMetricInstruments(t *testing.T) {
	ins, reader := newTestInstruments(t)
	ctx, _ := metricSpanContext(t, true)
	m := measuretest.Streamed()
	ins.Record(&sink.Result{Ctx: ctx, M: m, Provider: "openai", Host: "api.openai.com", Port: 443})
	got := collectMetrics(t, reader)
	tests := []struct {
		name   string
		unit   string
		bounds []float64
	}{
		{"gen_ai.client.operation.duration", "s", durationBuckets},
		{"gen_ai.client.token.usage", "{token}", tokenBuckets},
		{"gen_ai.client.operation.time_to_first_chunk", "s", durationBuckets},
		{"gen_ai.client.operation.time_per_output_chunk", "s", durationBuckets},
		{"tokentap.time_to_first_token", "s", timeToFirstTokenBuckets},
		{"tokentap.output_token_rate", "{token}/s", tokensPerSecondBuckets},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pts := got.points[tt.name]
			if len(pts) == 0 {
				t.Fatal("no points")
			}
			if got.units[tt.name] != tt.unit {
				t.Errorf("unit %q, want %q", got.units[tt.name], tt.unit)
			}
			if got.descs[tt.name] == "" {
				t.Error("no description")
			}
			for _, p := range pts {
				if !reflect.DeepEqual(p.bounds, tt.bounds) {
					t.Errorf("bounds %v, want %v", p.bounds, tt.bounds)
				}
			}
		})
	}
	if n := len(got.points); n != len(tests) {
		t.Errorf("%d metrics, want %d", n, len(tests))
	}
	for _, b := range [][]float64{durationBuckets, tokenBuckets, timeToFirstTokenBuckets, tokensPerSecondBuckets} {
		if !sort.Float64sAreSorted(b) {
			t.Errorf("bounds not increasing: %v", b)
		}
	}
	// The meter's chunk-gap buckets are the duration buckets, so the
	// per-chunk histogram loses nothing.
	for i, b := range durationBuckets {
		if got := meter.ChunkGapBound(i).Seconds(); got != b {
			t.Errorf("chunk gap bound %d = %v s, duration bucket %v", i, got, b)
		}
	}
	if len(durationBuckets) != meter.ChunkGapBuckets-1 {
		t.Errorf("%d duration buckets, %d chunk gap bounds", len(durationBuckets), meter.ChunkGapBuckets-1)
	}
}

// TestBucketResolution holds the bucket boundaries to what their comments
// and docs/telemetry.md promise: how far apart neighbouring bounds may be,
// in the range where models are compared.
func TestBucketResolution(t *testing.T) {
	tests := []struct {
		name     string
		bounds   []float64
		from, to float64
		maxRatio float64
	}{
		{"time to first token, 50 ms to 3 s", timeToFirstTokenBuckets, 0.05, 3, 1.5},
		{"time to first token, above 3 s", timeToFirstTokenBuckets, 3, 120, 2},
		{"tokens/s, 10 to 3000", tokensPerSecondBuckets, 10, 3000, 1.5},
		{"semconv durations double", durationBuckets, 0.01, 81.92, 2},
		{"semconv tokens quadruple", tokenBuckets, 1, 67108864, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !slices.Contains(tt.bounds, tt.from) || !slices.Contains(tt.bounds, tt.to) {
				t.Fatalf("%v and %v must be bounds: %v", tt.from, tt.to, tt.bounds)
			}
			for i := 1; i < len(tt.bounds); i++ {
				lo, hi := tt.bounds[i-1], tt.bounds[i]
				if lo >= tt.from && hi <= tt.to && hi/lo > tt.maxRatio+1e-9 {
					t.Errorf("%v to %v: ratio %.3f, want at most %v", lo, hi, hi/lo, tt.maxRatio)
				}
			}
		})
	}
}

// TestMetricPoints: what each kind of exchange records, with which
// attributes and values.
func TestMetricPoints(t *testing.T) {
	base := map[string]any{
		"gen_ai.operation.name":  "chat",
		"gen_ai.provider.name":   "openai",
		"gen_ai.request.model":   "gpt-4o-mini",
		"gen_ai.response.model":  "gpt-4o-mini-2024-07-18",
		"server.address":         "api.openai.com",
		"server.port":            int64(443),
		"tokentap.usage.source":  "reported",
		"tokentap.label.team":    "search",
		"tokentap.label.feature": "autocomplete",
	}
	with := func(changes map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range changes {
			if v == nil {
				delete(out, k)
			} else {
				out[k] = v
			}
		}
		return out
	}
	type want struct {
		attrs map[string]any
		count uint64
		sum   float64
	}
	tokens := func(attrs map[string]any, typ string, n float64) want {
		a := map[string]any{"gen_ai.token.type": typ}
		for k, v := range attrs {
			a[k] = v
		}
		return want{a, 1, n}
	}
	// streamed is what measuretest.Streamed records, every point with attrs:
	// the five timing points, its output rate at outputRate tokens/s, and
	// the token usage points given (none: no token usage recorded).
	streamed := func(attrs map[string]any, outputRate float64, usage ...want) map[string][]want {
		w := map[string][]want{
			"gen_ai.client.operation.duration":              {{attrs, 1, 1.2}},
			"gen_ai.client.operation.time_to_first_chunk":   {{attrs, 1, 0.1}},
			"gen_ai.client.operation.time_per_output_chunk": {{attrs, 10, 0.975}},
			"tokentap.time_to_first_token":                  {{attrs, 1, 0.12}},
			"tokentap.output_token_rate":                    {{attrs, 1, outputRate}},
		}
		if len(usage) > 0 {
			w["gen_ai.client.token.usage"] = usage
		}
		return w
	}
	injected := with(map[string]any{"tokentap.usage.source": "injected"})
	estimated := with(map[string]any{"tokentap.usage.source": "estimated"})
	serverError := with(map[string]any{"error.type": "server_error"})

	tests := []struct {
		name  string
		m     func() *meter.Measurement
		host  string
		port  int
		attrs map[string]any
		want  map[string][]want
	}{
		{
			name:  "stream with reported usage",
			m:     measuretest.Streamed,
			attrs: base,
			want:  streamed(base, 100, tokens(base, "input", 50), tokens(base, "output", 101)),
		},
		{
			name: "stream with usage injected on request",
			m: func() *meter.Measurement {
				m := measuretest.Streamed()
				m.Usage.Source = meter.UsageInjected
				return m
			},
			attrs: injected,
			want:  streamed(injected, 100, tokens(injected, "input", 50), tokens(injected, "output", 101)),
		},
		{
			name: "stream without usage: estimated output, no token usage",
			m: func() *meter.Measurement {
				m := measuretest.Streamed()
				m.Usage = measuretest.Usage(-1, 51, meter.UsageEstimated)
				return m
			},
			want: streamed(estimated, 50),
		},
		{
			name: "estimated output with reported input: only the input metricPoint",
			m: func() *meter.Measurement {
				m := measuretest.Streamed()
				m.Usage = measuretest.Usage(12, 51, meter.UsageEstimated)
				return m
			},
			want: streamed(estimated, 50, tokens(estimated, "input", 12)),
		},
		{
			name: "non-streamed JSON: duration and tokens only",
			m: func() *meter.Measurement {
				return &meter.Measurement{
					Operation: "chat", Request: meter.Request{Model: "gpt-4o-mini"},
					StatusCode: 200, FirstByte: 700 * time.Millisecond, End: 750 * time.Millisecond,
					Usage:         measuretest.Usage(20, 7, meter.UsageReported),
					ResponseModel: "gpt-4o-mini-2024-07-18", Outcome: meter.OutcomeCompleted,
				}
			},
			want: map[string][]want{
				"gen_ai.client.operation.duration": {{base, 1, 0.75}},
				"gen_ai.client.token.usage":        {tokens(base, "input", 20), tokens(base, "output", 7)},
			},
		},
		{
			name: "error status: duration with error.type, no usage",
			m: func() *meter.Measurement {
				return &meter.Measurement{
					Operation: "chat", Request: meter.Request{Model: "gpt-4o-mini", Stream: true},
					StatusCode: 429, FirstByte: 30 * time.Millisecond, End: 31 * time.Millisecond,
					Usage:   measuretest.Usage(-1, -1, meter.UsageAbsent),
					Outcome: meter.OutcomeUpstreamError, ErrorType: "429",
				}
			},
			want: map[string][]want{
				"gen_ai.client.operation.duration": {{with(map[string]any{"error.type": "429", "tokentap.usage.source": "absent", "gen_ai.response.model": nil}), 1, 0.031}},
			},
		},
		{
			name: "error event inside a stream: the input the provider reported",
			m: func() *meter.Measurement {
				return &meter.Measurement{
					Operation: "chat", Request: meter.Request{Model: "gpt-4o-mini", Stream: true},
					StatusCode: 200, Streamed: true, FirstByte: 40 * time.Millisecond, FirstChunk: 40 * time.Millisecond, End: 60 * time.Millisecond,
					Chunks: 2, MaxChunkGap: 20 * time.Millisecond,
					ChunkGaps:     meter.ChunkGaps{Count: [meter.ChunkGapBuckets]uint32{1: 1}, Sum: [meter.ChunkGapBuckets]time.Duration{1: 20 * time.Millisecond}},
					Usage:         measuretest.Usage(9, -1, meter.UsageReported),
					ResponseModel: "gpt-4o-mini-2024-07-18", Outcome: meter.OutcomeUpstreamError, ErrorType: "server_error",
				}
			},
			want: map[string][]want{
				"gen_ai.client.operation.duration":              {{serverError, 1, 0.06}},
				"gen_ai.client.operation.time_to_first_chunk":   {{serverError, 1, 0.04}},
				"gen_ai.client.operation.time_per_output_chunk": {{serverError, 1, 0.02}},
				"gen_ai.client.token.usage":                     {tokens(serverError, "input", 9)},
			},
		},
		{
			name: "upstream unreachable: no server attributes",
			m: func() *meter.Measurement {
				return &meter.Measurement{
					Operation: "chat", Request: meter.Request{Model: "gpt-4o-mini"}, End: 3 * time.Millisecond,
					Usage:   measuretest.Usage(-1, -1, meter.UsageAbsent),
					Outcome: meter.OutcomeUpstreamError, ErrorType: "502",
				}
			},
			host: "-",
			want: map[string][]want{
				"gen_ai.client.operation.duration": {{with(map[string]any{"error.type": "502", "tokentap.usage.source": "absent",
					"gen_ai.response.model": nil, "server.address": nil, "server.port": nil}), 1, 0.003}},
			},
		},
		{
			name: "invalid UTF-8 from the traffic is repaired",
			m: func() *meter.Measurement {
				return &meter.Measurement{
					Operation: "chat", Request: meter.Request{Model: "gpt\xff-4o"}, End: time.Second,
					Usage:         measuretest.Usage(-1, -1, meter.UsageAbsent),
					ResponseModel: "\xc3(", Outcome: meter.OutcomeCompleted,
				}
			},
			want: map[string][]want{
				"gen_ai.client.operation.duration": {{with(map[string]any{"gen_ai.request.model": "gpt\uFFFD-4o", "gen_ai.response.model": "\uFFFD(",
					"tokentap.usage.source": "absent"}), 1, 1}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ins, reader := newTestInstruments(t)
			ctx, _ := metricSpanContext(t, true)
			host, port := "api.openai.com", 443
			if tt.host == "-" {
				host, port = "", 0
			}
			f := &sink.Result{Ctx: ctx, M: tt.m(), Provider: "openai", Host: host, Port: port, Labels: []sink.Label{
				{Name: "feature", Value: "autocomplete"},
				{Name: "team", Value: "search"},
			}}
			ins.Record(f)
			got := collectMetrics(t, reader)
			for name := range got.points {
				if _, ok := tt.want[name]; !ok {
					t.Errorf("unexpected %s: %+v", name, got.points[name])
				}
			}
			for name, wants := range tt.want {
				pts := got.points[name]
				if len(pts) != len(wants) {
					t.Errorf("%s: %d points, want %d: %+v", name, len(pts), len(wants), pts)
					continue
				}
				for _, w := range wants {
					var p *metricPoint
					for i := range pts {
						if reflect.DeepEqual(pts[i].attrs, w.attrs) {
							p = &pts[i]
						}
					}
					if p == nil {
						t.Errorf("%s: no metricPoint with attributes\n%v\namong %+v", name, w.attrs, pts)
						continue
					}
					if p.count != w.count || math.Abs(p.sum-w.sum) > 1e-9 {
						t.Errorf("%s: count %d sum %v, want %d and %v", name, p.count, p.sum, w.count, w.sum)
					}
				}
			}
		})
	}
}

// TestChunkGapPoints: the per-chunk histogram has one point per gap, the
// meter's bucket counts, the exact sum and the exact largest gap.
func TestChunkGapPoints(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		gaps    []time.Duration
		wantMax time.Duration
	}{
		{"one gap", []time.Duration{30 * ms}, 30 * ms},
		{"steady 20ms", []time.Duration{20 * ms, 20 * ms, 20 * ms, 20 * ms}, 20 * ms},
		{"a stall among small gaps", []time.Duration{5 * ms, 7 * ms, 3 * ms, 2500 * ms, 9 * ms, 12 * ms, 25 * ms}, 2500 * ms},
		{"several in the top bucket", []time.Duration{700 * ms, 1100 * ms, 900 * ms, 1 * ms}, 1100 * ms},
		{"past the last bound", []time.Duration{100 * time.Second, 1 * ms}, 100 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ins, reader := newTestInstruments(t)
			m := &meter.Measurement{Operation: "chat", Streamed: true, End: time.Minute, Chunks: int64(len(tt.gaps) + 1),
				Usage: meter.Usage{InputTokens: -1, OutputTokens: -1}}
			var wantCounts [meter.ChunkGapBuckets]uint64
			var sum time.Duration
			for _, g := range tt.gaps {
				i := sort.Search(len(durationBuckets), func(i int) bool { return g.Seconds() <= durationBuckets[i] })
				m.ChunkGaps.Count[i]++
				m.ChunkGaps.Sum[i] += g
				wantCounts[i]++
				sum += g
				m.MaxChunkGap = max(m.MaxChunkGap, g)
			}
			ins.Record(&sink.Result{Ctx: context.Background(), M: m, Provider: "openai"})
			pts := collectMetrics(t, reader).points["gen_ai.client.operation.time_per_output_chunk"]
			if len(pts) != 1 {
				t.Fatalf("%d points", len(pts))
			}
			p := pts[0]
			if p.count != uint64(len(tt.gaps)) || math.Abs(p.sum-sum.Seconds()) > 1e-9 || p.max != tt.wantMax.Seconds() {
				t.Errorf("count %d sum %v max %v, want %d, %v, %v", p.count, p.sum, p.max, len(tt.gaps), sum.Seconds(), tt.wantMax.Seconds())
			}
			if !reflect.DeepEqual(p.bucketCounts, wantCounts[:]) {
				t.Errorf("bucket counts %v, want %v", p.bucketCounts, wantCounts)
			}
		})
	}
}

// TestExemplars: points recorded inside a sampled span carry its trace and
// span ids, so a dashboard can jump from a slow bucket to the trace; an
// unsampled span leaves none (the SDK's trace-based filter). The chunk-gap
// histogram's exemplar is the request's largest gap.
func TestExemplars(t *testing.T) {
	for _, sampled := range []bool{true, false} {
		name := map[bool]string{true: "sampled span", false: "unsampled span"}[sampled]
		t.Run(name, func(t *testing.T) {
			ins, reader := newTestInstruments(t)
			ctx, sc := metricSpanContext(t, sampled)
			m := measuretest.Streamed()
			ins.Record(&sink.Result{Ctx: ctx, M: m, Provider: "openai", Host: "api.openai.com", Port: 443})
			got := collectMetrics(t, reader)
			for name, pts := range got.points {
				for _, p := range pts {
					if !sampled {
						if len(p.exemplars) != 0 {
							t.Errorf("%s: %d exemplars from an unsampled span", name, len(p.exemplars))
						}
						continue
					}
					if len(p.exemplars) == 0 {
						t.Errorf("%s: no exemplar", name)
					}
					for _, e := range p.exemplars {
						if trace.TraceID(e.TraceID) != sc.TraceID() || trace.SpanID(e.SpanID) != sc.SpanID() {
							t.Errorf("%s: exemplar trace %x span %x, want %s %s", name, e.TraceID, e.SpanID, sc.TraceID(), sc.SpanID())
						}
						if name == "gen_ai.client.operation.time_per_output_chunk" && e.Value != m.MaxChunkGap.Seconds() {
							t.Errorf("%s: exemplar %v s, want the largest gap, %v", name, e.Value, m.MaxChunkGap.Seconds())
						}
					}
				}
			}
		})
	}
}

// TestMetricCardinalityCaps: values from traffic stop making new series at
// their cap; later new values are reported as the overflow value.
func TestMetricCardinalityCaps(t *testing.T) {
	saved := []*ValueSet{requestModels, responseModels, serverAddrs, errorTypes}
	savedPorts := serverPorts
	requestModels, responseModels = &ValueSet{max: 2}, &ValueSet{max: 2}
	serverAddrs, errorTypes, serverPorts = &ValueSet{max: 2}, &ValueSet{max: 2}, &portSet{max: 2}
	t.Cleanup(func() {
		requestModels, responseModels, serverAddrs, errorTypes = saved[0], saved[1], saved[2], saved[3]
		serverPorts = savedPorts
	})

	ins, reader := newTestInstruments(t)
	for i := range 50 {
		suffix := string(rune('a' + i%26))
		m := &meter.Measurement{Operation: "chat", Request: meter.Request{Model: "req-" + suffix}, ResponseModel: "resp-" + suffix,
			End: time.Second, ErrorType: "err-" + suffix, Usage: meter.Usage{InputTokens: -1, OutputTokens: -1}}
		ins.Record(&sink.Result{Ctx: context.Background(), M: m, Provider: "openai", Host: "h-" + suffix, Port: 1000 + i})
	}
	pts := collectMetrics(t, reader).points["gen_ai.client.operation.duration"]
	values := map[string]map[any]bool{}
	for _, p := range pts {
		for k, v := range p.attrs {
			if values[k] == nil {
				values[k] = map[any]bool{}
			}
			values[k][v] = true
		}
	}
	for _, tt := range []struct {
		attr     string
		overflow any
	}{
		{"gen_ai.request.model", OverflowLabelValue},
		{"gen_ai.response.model", OverflowLabelValue},
		{"server.address", OverflowLabelValue},
		{"error.type", "_OTHER"},
	} {
		if n := len(values[tt.attr]); n != 3 || !values[tt.attr][tt.overflow] {
			t.Errorf("%s took %d values %v, want 2 and %v", tt.attr, n, values[tt.attr], tt.overflow)
		}
	}
	if n := len(values["server.port"]); n > 2 {
		t.Errorf("server.port took %d values, want at most 2", n)
	}
	if n := len(pts); n > 3*3*3*3 {
		t.Errorf("%d series", n)
	}
}

// TestRecordMetricsDisabled: with the SDK disabled nothing is built, and
// no instruments at all (a handler provisioned without metrics) do not fail.
func TestRecordMetricsDisabled(t *testing.T) {
	for _, tt := range []struct {
		name string
		ins  *Instruments
	}{
		{"no instruments", nil},
		{"disabled instruments", &Instruments{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &sink.Result{Ctx: context.Background(), M: measuretest.Streamed(), Provider: "openai"}
			if allocs := testing.AllocsPerRun(100, func() { tt.ins.Record(f) }); allocs != 0 {
				t.Errorf("%v allocations per record, want 0", allocs)
			}
		})
	}
}

// TestAttrCache: an attribute combination is built once and found again
// by value; different combinations get their own sets; past the cap,
// sets are still built (per request) but no longer kept.
func TestAttrCache(t *testing.T) {
	kv := func(model string, port int) []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("gen_ai.request.model", model), attribute.Int("server.port", port)}
	}
	c := newAttrCache(3)
	tests := []struct {
		name     string
		kvs      []attribute.KeyValue
		sameAs   string // a previous case whose options must be reused
		wantKept int
	}{
		{"first combination", kv("a", 1), "", 1},
		{"the same values again", kv("a", 1), "first combination", 1},
		{"another model", kv("b", 1), "", 2},
		{"another port", kv("a", 2), "", 3},
		{"past the cap", kv("c", 1), "", 3},
		{"past the cap, again", kv("c", 1), "", 3},
		{"a kept one, after the cap", kv("b", 1), "another model", 3},
	}
	seen := map[string]*recordOpts{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.kvs)
			o := c.lookup(in)
			if !slices.Equal(in, tt.kvs) {
				t.Error("lookup changed its argument")
			}
			seen[tt.name] = o
			if tt.sameAs != "" && o != seen[tt.sameAs] {
				t.Errorf("new options, want those of %q", tt.sameAs)
			}
			for name, prev := range seen {
				if name != tt.name && name != tt.sameAs && prev == o && tt.sameAs == "" {
					t.Errorf("shares the options of %q", name)
				}
			}
			if c.n != tt.wantKept {
				t.Errorf("%d kept, want %d", c.n, tt.wantKept)
			}
			var cfg = metric.NewRecordConfig(o.input[:])
			set := cfg.Attributes()
			if v, ok := set.Value("gen_ai.token.type"); !ok || v.AsString() != "input" {
				t.Errorf("input set lacks gen_ai.token.type=input: %v", set)
			}
			for _, want := range tt.kvs {
				if v, ok := set.Value(want.Key); !ok || v != want.Value {
					t.Errorf("input set lacks %v", want)
				}
			}
		})
	}
}

// TestRecordAllocations: once an attribute combination has been seen,
// recording an exchange allocates nothing.
func TestRecordAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	ins, _ := newTestInstruments(t)
	ctx, _ := metricSpanContext(t, true)
	f := &sink.Result{Ctx: ctx, M: measuretest.Streamed(), Provider: "openai", Host: "api.openai.com", Port: 443,
		Labels: []sink.Label{{Name: "team", Value: "search"}}}
	ins.Record(f)
	if allocs := testing.AllocsPerRun(200, func() { ins.Record(f) }); allocs != 0 {
		t.Errorf("%v allocations per exchange, want 0", allocs)
	}
}

// BenchmarkRecordMetrics measures what recording costs a request at its
// end, for a stream (six histograms, 40 chunk gaps, two token points) and
// a non-streamed response (duration and tokens).
func BenchmarkRecordMetrics(b *testing.B) {
	for _, bc := range []struct {
		name string
		m    func() *meter.Measurement
	}{
		{"stream of 41 chunks", func() *meter.Measurement {
			m := measuretest.Streamed()
			m.Chunks = 41
			m.ChunkGaps = meter.ChunkGaps{}
			m.ChunkGaps.Count[3], m.ChunkGaps.Sum[3] = 40, 40*50*time.Millisecond
			return m
		}},
		{"non-streamed", func() *meter.Measurement {
			m := measuretest.Streamed()
			m.Streamed, m.FirstChunk, m.FirstToken, m.LastToken, m.Chunks = false, 0, 0, 0, 0
			m.ChunkGaps = meter.ChunkGaps{}
			return m
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ins, _ := newTestInstruments(b)
			ctx, _ := metricSpanContext(b, true)
			f := &sink.Result{Ctx: ctx, M: bc.m(), Provider: "openai", Host: "api.openai.com", Port: 443,
				Labels: []sink.Label{{Name: "team", Value: "search"}}}
			b.ReportAllocs()
			for b.Loop() {
				ins.Record(f)
			}
		})
	}
}
