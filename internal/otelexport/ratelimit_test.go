package otelexport

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/ratelimit"
	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/testutil/measuretest"
)

// openAILimits is the OpenAI documentation's sample (ratelimit's tests).
var openAILimits = ratelimit.Headers{Limits: [ratelimit.NumKinds]ratelimit.Limit{
	ratelimit.Requests: {Limit: 60, Remaining: 59, HasLimit: true, HasRemaining: true, Reset: time.Second, HasReset: true},
	ratelimit.Tokens:   {Limit: 150000, Remaining: 149984, HasLimit: true, HasRemaining: true, Reset: 6 * time.Minute, HasReset: true},
}}

// TestRateLimitSpan: the span carries each reported value under
// tokentap.ratelimit.<kind>.*, nothing for what was not reported, and a
// throttled exchange is an error span with its error type.
func TestRateLimitSpan(t *testing.T) {
	throttled := measuretest.Streamed()
	throttled.Outcome, throttled.ErrorType, throttled.StatusCode = meter.OutcomeThrottled, "429", 429
	tests := []struct {
		name       string
		m          *meter.Measurement
		rl         ratelimit.Headers
		want       map[attribute.Key]attribute.Value
		absent     []attribute.Key
		wantStatus codes.Code
		desc       string
	}{
		{
			name: "openai headers", m: measuretest.Streamed(), rl: openAILimits,
			want: map[attribute.Key]attribute.Value{
				"tokentap.ratelimit.requests.limit":           attribute.Int64Value(60),
				"tokentap.ratelimit.requests.remaining":       attribute.Int64Value(59),
				"tokentap.ratelimit.requests.reset":           attribute.Float64Value(1),
				"tokentap.ratelimit.requests.remaining_share": attribute.Float64Value(59.0 / 60),
				"tokentap.ratelimit.tokens.reset":             attribute.Float64Value(360),
				"tokentap.outcome":                            attribute.StringValue("completed"),
			},
			absent:     []attribute.Key{"tokentap.ratelimit.input_tokens.remaining", attrRetryAfter},
			wantStatus: codes.Unset,
		},
		{
			name: "throttled with retry-after", m: throttled,
			rl: ratelimit.Headers{Limits: [ratelimit.NumKinds]ratelimit.Limit{ratelimit.Requests: {Remaining: 0, HasRemaining: true}},
				RetryAfter: 30 * time.Second, HasRetryAfter: true},
			want: map[attribute.Key]attribute.Value{
				"tokentap.ratelimit.requests.remaining": attribute.Int64Value(0),
				"tokentap.ratelimit.retry_after":        attribute.Float64Value(30),
				"tokentap.outcome":                      attribute.StringValue("throttled"),
				"error.type":                            attribute.StringValue("429"),
			},
			absent:     []attribute.Key{"tokentap.ratelimit.requests.limit", "tokentap.ratelimit.requests.remaining_share"},
			wantStatus: codes.Error, desc: "throttled: 429",
		},
		{
			name: "no headers", m: measuretest.Streamed(),
			absent:     []attribute.Key{"tokentap.ratelimit.requests.remaining", "tokentap.ratelimit.tokens.remaining", attrRetryAfter},
			wantStatus: codes.Unset,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			ctx, _ := tp.Tracer("test").Start(context.Background(), "chat")
			Spans{}.Record(&sink.Result{Ctx: ctx, M: tt.m, Provider: "openai", RateLimit: tt.rl})
			span := rec.Ended()[0]
			got := map[attribute.Key]attribute.Value{}
			for _, kv := range span.Attributes() {
				got[kv.Key] = kv.Value
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v", k, got[k].Emit(), v.Emit())
				}
			}
			for _, k := range tt.absent {
				if v, ok := got[k]; ok {
					t.Errorf("%s = %v, want absent", k, v.Emit())
				}
			}
			if st := span.Status(); st.Code != tt.wantStatus || st.Description != tt.desc {
				t.Errorf("status = %v %q, want %v %q", st.Code, st.Description, tt.wantStatus, tt.desc)
			}
		})
	}
}

// gaugePoints collects the rate limit gauges by model and kind.
func gaugePoints(t *testing.T, collect func(*metricdata.ResourceMetrics) error) (share, reset map[string]float64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := collect(&rm); err != nil {
		t.Fatal(err)
	}
	share, reset = map[string]float64{}, map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			into := map[string]map[string]float64{metricRateLimitShare: share, metricRateLimitReset: reset}[m.Name]
			if into == nil {
				continue
			}
			for _, dp := range m.Data.(metricdata.Gauge[float64]).DataPoints {
				model, _ := dp.Attributes.Value("gen_ai.response.model")
				kind, _ := dp.Attributes.Value(attrRateLimitKind)
				host, _ := dp.Attributes.Value("server.address")
				into[host.AsString()+" "+model.AsString()+" "+kind.AsString()] = dp.Value
			}
		}
	}
	return share, reset
}

// TestRateLimitGauges: the gauges report each series' latest report, the
// reset as the time left at collection; a later report replaces an
// earlier one; a kind with no limit reported has no share point.
func TestRateLimitGauges(t *testing.T) {
	ins, reader := newTestInstruments(t)
	m := measuretest.Streamed()
	m.ResponseModel = "gauge-model"
	end := time.Now()
	r := &sink.Result{Ctx: context.Background(), M: m, End: end, Provider: "openai", Host: "gauge.example", RateLimit: openAILimits}
	ins.Record(r)
	later := openAILimits
	later.Limits[ratelimit.Requests].Remaining = 15
	later.Limits[ratelimit.Tokens] = ratelimit.Limit{Remaining: 10, HasRemaining: true}
	r.RateLimit = later
	ins.Record(r)

	share, reset := gaugePoints(t, func(rm *metricdata.ResourceMetrics) error { return reader.Collect(context.Background(), rm) })
	if v := share["gauge.example gauge-model requests"]; v != 0.25 {
		t.Errorf("requests share = %v, want 0.25 (15 of 60)", v)
	}
	if v, ok := share["gauge.example gauge-model tokens"]; ok {
		t.Errorf("tokens share = %v, want none: the later report has no limit", v)
	}
	if v := reset["gauge.example gauge-model requests"]; !(v > 0 && v <= 1) {
		t.Errorf("requests reset = %v s, want within the 1 s reported", v)
	}
	if v, ok := reset["gauge.example gauge-model tokens"]; ok {
		t.Errorf("tokens reset = %v, want none: the later report has no reset", v)
	}
}

// TestRateLimitSeriesCap: past its cap a table adds no series, and finds
// the ones it has.
func TestRateLimitSeriesCap(t *testing.T) {
	const max = 5
	tab := newRateLimitTable(max)
	labels := []sink.Label{{Name: "team", Value: "a"}}
	for i := range max {
		if tab.series("p", "h", fmt.Sprint("model-", i), labels) == nil {
			t.Fatalf("series %d refused before the cap", i)
		}
	}
	if s := tab.series("p", "h", "one-too-many", labels); s != nil {
		t.Error("a series past the cap was added")
	}
	first := tab.series("p", "h", "model-0", labels)
	if first == nil || first != tab.series("p", "h", "model-0", []sink.Label{{Name: "team", Value: "a"}}) {
		t.Error("a known series is not found again past the cap")
	}
	n := 0
	tab.each(func(*rateLimitSeries, int) { n++ })
	if want := max * int(ratelimit.NumKinds); n != want {
		t.Errorf("each visited %d series and kinds, want %d", n, want)
	}
}

// TestRateLimitRecordAllocations: once its series exists, keeping an
// exchange's rate limits for the gauges allocates nothing.
func TestRateLimitRecordAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	r := &sink.Result{Ctx: context.Background(), M: measuretest.Streamed(), End: time.Now(), Provider: "openai",
		Host: "alloc.example", Labels: []sink.Label{{Name: "team", Value: "search"}}, RateLimit: openAILimits}
	recordRateLimit(r)
	if allocs := testing.AllocsPerRun(200, func() { recordRateLimit(r) }); allocs != 0 {
		t.Errorf("%v allocations per exchange, want 0", allocs)
	}
}

// BenchmarkRecordRateLimit is the gauges' cost per exchange.
func BenchmarkRecordRateLimit(b *testing.B) {
	r := &sink.Result{Ctx: context.Background(), M: measuretest.Streamed(), End: time.Now(), Provider: "openai",
		Host: "bench.example", RateLimit: openAILimits}
	b.ReportAllocs()
	for b.Loop() {
		recordRateLimit(r)
	}
}

// TestRateLimitConcurrent: requests of new and known series update the
// table while the gauges are collected (run with -race).
func TestRateLimitConcurrent(t *testing.T) {
	ins, reader := newTestInstruments(t)
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 200 {
				m := measuretest.Streamed()
				m.ResponseModel = fmt.Sprintf("concurrent-%d", (g*7+i)%20)
				ins.Record(&sink.Result{Ctx: context.Background(), M: m, End: time.Now(), Provider: "openai", RateLimit: openAILimits})
			}
		}()
	}
	for range 20 {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		<-done
	}
	share, _ := gaugePoints(t, func(rm *metricdata.ResourceMetrics) error { return reader.Collect(context.Background(), rm) })
	for i := range 20 {
		if v := share[fmt.Sprintf(" concurrent-%d requests", i)]; v != 59.0/60 {
			t.Errorf("concurrent-%d requests share = %v, want %v", i, v, 59.0/60)
		}
	}
}
