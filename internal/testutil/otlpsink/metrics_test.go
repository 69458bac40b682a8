package otlpsink

import (
	"bytes"
	"context"
	"net/http"
	"reflect"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// sampledContext is a context inside a sampled span, which is what the SDK's
// default exemplar filter asks for before it keeps an exemplar.
func sampledContext(t *testing.T) (context.Context, trace.SpanContext) {
	t.Helper()
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0xa1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:     trace.SpanID{0xb2, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled,
	})
	return trace.ContextWithSpanContext(context.Background(), sc), sc
}

// TestExportedMetricsArrive sends a histogram with an exemplar, a counter
// and a gauge through the real OTLP metric exporters, over gRPC and over
// HTTP, compressed or not, and reads them back.
func TestExportedMetricsArrive(t *testing.T) {
	for _, tc := range []struct {
		name     string
		http     bool
		gzip     bool
		delta    bool
		wantTemp string
	}{
		{name: "grpc", wantTemp: "cumulative"},
		{name: "grpc gzip", gzip: true, wantTemp: "cumulative"},
		{name: "http/protobuf", http: true, wantTemp: "cumulative"},
		{name: "http/protobuf gzip, delta", http: true, gzip: true, delta: true, wantTemp: "delta"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s *Sink
			var err error
			if tc.http {
				s, err = StartHTTP("127.0.0.1:0")
			} else {
				s, err = Start("127.0.0.1:0")
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)

			temporality := sdkmetric.DefaultTemporalitySelector
			if tc.delta {
				temporality = func(sdkmetric.InstrumentKind) metricdata.Temporality { return metricdata.DeltaTemporality }
			}
			var exp sdkmetric.Exporter
			if tc.http {
				opts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpoint(s.Addr()), otlpmetrichttp.WithInsecure(),
					otlpmetrichttp.WithTemporalitySelector(temporality)}
				if tc.gzip {
					opts = append(opts, otlpmetrichttp.WithCompression(otlpmetrichttp.GzipCompression))
				}
				exp, err = otlpmetrichttp.New(waitCtx(t), opts...)
			} else {
				opts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpoint(s.Addr()), otlpmetricgrpc.WithInsecure(),
					otlpmetricgrpc.WithTemporalitySelector(temporality)}
				if tc.gzip {
					opts = append(opts, otlpmetricgrpc.WithCompressor("gzip"))
				}
				exp, err = otlpmetricgrpc.New(waitCtx(t), opts...)
			}
			if err != nil {
				t.Fatal(err)
			}
			reader := sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(time.Hour))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader),
				sdkmetric.WithResource(resource.NewSchemaless(attribute.String("service.name", "sink-metrics"))))
			t.Cleanup(func() {
				if err := mp.Shutdown(context.Background()); err != nil {
					t.Errorf("shutting down the meter provider: %v", err)
				}
			})
			m := mp.Meter("otlpsink/test")
			hist, err := m.Float64Histogram("latency", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(0.1, 1))
			if err != nil {
				t.Fatal(err)
			}
			counter, err := m.Int64Counter("requests", metric.WithUnit("{request}"))
			if err != nil {
				t.Fatal(err)
			}
			gauge, err := m.Float64Gauge("temperature")
			if err != nil {
				t.Fatal(err)
			}
			ctx, sc := sampledContext(t)
			attrs := metric.WithAttributes(attribute.String("model", "sim-fast"), attribute.Int("port", 8081))
			hist.Record(ctx, 0.05, attrs)
			hist.Record(ctx, 0.5, attrs)
			hist.Record(ctx, 2.5, attrs)
			counter.Add(ctx, 3, attrs)
			gauge.Record(ctx, 21.5)
			if err := mp.ForceFlush(waitCtx(t)); err != nil {
				t.Fatal(err)
			}

			byName := func(name string) Metric {
				t.Helper()
				got, err := s.WaitForMetric(waitCtx(t), func(m Metric) bool { return m.Name == name })
				if err != nil {
					t.Fatal(err)
				}
				if len(got.Points) != 1 {
					t.Fatalf("%s: %d points, want 1", name, len(got.Points))
				}
				if got.Scope != "otlpsink/test" || got.Resource["service.name"] != "sink-metrics" {
					t.Errorf("%s: scope %q, resource %v", name, got.Scope, got.Resource)
				}
				return got
			}
			wantAttrs := map[string]any{"model": "sim-fast", "port": int64(8081)}

			h := byName("latency")
			p := h.Points[0]
			if h.Kind != "histogram" || h.Unit != "s" || h.Temporality != tc.wantTemp {
				t.Errorf("latency: kind %q unit %q temporality %q", h.Kind, h.Unit, h.Temporality)
			}
			if !reflect.DeepEqual(p.Attributes, wantAttrs) {
				t.Errorf("latency attributes %v, want %v", p.Attributes, wantAttrs)
			}
			if p.Count != 3 || !p.HasSum || p.Sum != 3.05 || !reflect.DeepEqual(p.Bounds, []float64{0.1, 1}) ||
				!reflect.DeepEqual(p.BucketCounts, []uint64{1, 1, 1}) {
				t.Errorf("latency point: count %d sum %v (%v) bounds %v counts %v", p.Count, p.Sum, p.HasSum, p.Bounds, p.BucketCounts)
			}
			if p.Min == nil || *p.Min != 0.05 || p.Max == nil || *p.Max != 2.5 {
				t.Errorf("latency min %v max %v, want 0.05 and 2.5", p.Min, p.Max)
			}
			if len(p.Exemplars) == 0 {
				t.Fatal("latency: no exemplars")
			}
			for _, e := range p.Exemplars {
				if e.TraceID != sc.TraceID().String() || e.SpanID != sc.SpanID().String() {
					t.Errorf("exemplar %+v, want trace %s span %s", e, sc.TraceID(), sc.SpanID())
				}
			}

			c := byName("requests")
			if c.Kind != "sum" || !c.Monotonic || c.Temporality != tc.wantTemp || c.Unit != "{request}" ||
				c.Points[0].Value != 3 || !c.Points[0].IsInt {
				t.Errorf("requests: %+v", c)
			}
			g := byName("temperature")
			if g.Kind != "gauge" || g.Temporality != "" || g.Points[0].Value != 21.5 || g.Points[0].IsInt {
				t.Errorf("temperature: %+v", g)
			}
		})
	}
}

// TestHTTPTraces: the HTTP sink takes spans too, from the real OTLP/HTTP
// trace exporter.
func TestHTTPTraces(t *testing.T) {
	s, err := StartHTTP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	exp, err := otlptracehttp.New(waitCtx(t), otlptracehttp.WithEndpoint(s.Addr()), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	_, sp := tp.Tracer("t").Start(context.Background(), "over http", trace.WithSpanKind(trace.SpanKindClient))
	sp.End()
	got, err := s.WaitFor(waitCtx(t), func(sp Span) bool { return sp.Name == "over http" })
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != "client" || got.SpanID != sp.SpanContext().SpanID().String() {
		t.Errorf("got %+v", got)
	}
}

// TestHTTPRejectsWhatItCannotRead: a request the sink cannot decode is
// answered with an error status, so an exporter misconfigured in a test
// fails visibly instead of appearing to deliver.
func TestHTTPRejectsWhatItCannotRead(t *testing.T) {
	s, err := StartHTTP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	for _, tc := range []struct {
		name        string
		method      string
		path        string
		contentType string
		encoding    string
		body        []byte
		want        int
	}{
		{"JSON body", "POST", "/v1/metrics", "application/json", "", []byte(`{}`), http.StatusUnsupportedMediaType},
		{"not protobuf", "POST", "/v1/metrics", "application/x-protobuf", "", []byte{0xff, 0xff, 0xff}, http.StatusBadRequest},
		{"not gzip", "POST", "/v1/traces", "application/x-protobuf", "gzip", []byte("plain"), http.StatusBadRequest},
		{"GET", "GET", "/v1/metrics", "", "", nil, http.StatusMethodNotAllowed},
		{"unknown path", "POST", "/v1/logs", "application/x-protobuf", "", nil, http.StatusNotFound},
		{"empty request", "POST", "/v1/metrics", "application/x-protobuf", "", nil, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(waitCtx(t), tc.method, s.Endpoint()+tc.path, bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			if tc.encoding != "" {
				req.Header.Set("Content-Encoding", tc.encoding)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	http.DefaultClient.CloseIdleConnections()
	if n := len(s.Metrics()) + len(s.Spans()); n != 0 {
		t.Errorf("%d items recorded from rejected or empty requests", n)
	}
}

// TestMetricsIsASnapshot: callers cannot change the sink's metrics through
// what they are handed.
func TestMetricsIsASnapshot(t *testing.T) {
	s := startSink(t)
	exp, err := otlpmetricgrpc.New(waitCtx(t), otlpmetricgrpc.WithEndpoint(s.Addr()), otlpmetricgrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(time.Hour))))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	h, _ := mp.Meter("t").Float64Histogram("h", metric.WithExplicitBucketBoundaries(1))
	ctx, _ := sampledContext(t)
	h.Record(ctx, 0.5, metric.WithAttributes(attribute.String("k", "v")))
	if err := mp.ForceFlush(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitForMetric(waitCtx(t), func(Metric) bool { return true }); err != nil {
		t.Fatal(err)
	}
	first := s.Metrics()
	p := &first[0].Points[0]
	p.Attributes["k"] = "changed"
	p.BucketCounts[0] = 99
	*p.Min = -1
	p.Exemplars[0].TraceID = "changed"
	first[0].Resource["x"] = "added"

	again := s.Metrics()[0]
	q := again.Points[0]
	if q.Attributes["k"] != "v" || q.BucketCounts[0] != 1 || *q.Min != 0.5 || q.Exemplars[0].TraceID == "changed" || again.Resource["x"] != nil {
		t.Errorf("sink's metric changed through a snapshot: %+v", again)
	}
}

// TestWaitForMetricGivesUp: like WaitFor, a wait ends at the deadline with
// an error naming what arrived.
func TestWaitForMetricGivesUp(t *testing.T) {
	s := startSink(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := s.WaitForMetric(ctx, func(Metric) bool { return false })
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("none received")) {
		t.Errorf("err = %v, want a deadline naming that nothing arrived", err)
	}
}
