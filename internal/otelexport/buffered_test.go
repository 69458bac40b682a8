package otelexport

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/sink"
	"github.com/tokentap/tokentap/internal/testutil/measuretest"
)

// TestBufferedAttribute: tokentap.stream.buffered is on the span, true,
// exactly when the stream was flagged.
func TestBufferedAttribute(t *testing.T) {
	for _, buffered := range []bool{false, true} {
		m := measuretest.Streamed()
		m.Buffered = buffered
		var got []bool
		for _, kv := range appendMeasurement(nil, &sink.Result{M: m}) {
			if kv.Key == attrStreamBuffered {
				got = append(got, kv.Value.AsBool())
			}
		}
		want := 0
		if buffered {
			want = 1
		}
		if len(got) != want || (want == 1 && !got[0]) {
			t.Errorf("buffered %v: attribute values %v", buffered, got)
		}
	}
}

// TestBufferedCounter: tokentap.stream.buffered counts each flagged stream
// once, under the exchange's attributes (its model and provider); a stream
// not flagged adds nothing.
func TestBufferedCounter(t *testing.T) {
	flagged := func(model string) *meter.Measurement {
		m := measuretest.Streamed()
		m.Request.Model, m.Buffered = model, true
		return m
	}
	ins, reader := newTestInstruments(t)
	for _, m := range []*meter.Measurement{flagged("a"), flagged("a"), flagged("b"), measuretest.Streamed()} {
		ins.Record(&sink.Result{Ctx: context.Background(), M: m, Provider: "openai"})
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != metricBuffered {
				continue
			}
			if m.Unit != "{request}" {
				t.Errorf("unit %q, want {request}", m.Unit)
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if v, _ := dp.Attributes.Value("gen_ai.provider.name"); v.AsString() != "openai" {
					t.Errorf("point without the exchange's attributes: %v", dp.Attributes.ToSlice())
				}
				model, _ := dp.Attributes.Value("gen_ai.request.model")
				got[model.AsString()] += dp.Value
			}
		}
	}
	if len(got) != 2 || got["a"] != 2 || got["b"] != 1 {
		t.Errorf("tokentap.stream.buffered by model %v, want a:2 b:1", got)
	}
}
