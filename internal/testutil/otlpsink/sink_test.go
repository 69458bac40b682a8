package otlpsink

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// TestMain fails the package if any test leaves a goroutine behind: the
// sink is used from other packages' tests, where a leak would be blamed on
// them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func startSink(t *testing.T) *Sink {
	t.Helper()
	s, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// newProvider builds the same pipeline tokentap uses (the real OTLP gRPC
// exporter behind a batcher) aimed at the sink. Its shutdown is registered
// before the sink's Close would run, since cleanups run last-in first-out.
func newProvider(t *testing.T, s *Sink, res *resource.Resource, opts ...otlptracegrpc.Option) *sdktrace.TracerProvider {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts = append([]otlptracegrpc.Option{otlptracegrpc.WithEndpoint(s.Addr()), otlptracegrpc.WithInsecure()}, opts...)
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(50*time.Millisecond)),
		sdktrace.WithResource(res),
	)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			t.Errorf("shutting down the tracer provider: %v", err)
		}
	})
	return tp
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestExportedSpansArrive(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []otlptracegrpc.Option
	}{
		{name: "plain"},
		// gzip is what many deployments set with
		// OTEL_EXPORTER_OTLP_COMPRESSION; the sink must decode it.
		{name: "gzip", opts: []otlptracegrpc.Option{otlptracegrpc.WithCompressor("gzip")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startSink(t)
			res := resource.NewSchemaless(
				attribute.String("service.name", "sink-test"),
				attribute.Int("service.instance.number", 7),
				attribute.Bool("deployment.canary", true),
			)
			tp := newProvider(t, s, res, tc.opts...)
			tracer := tp.Tracer("otlpsink/test")

			ctx, parent := tracer.Start(context.Background(), "parent", trace.WithSpanKind(trace.SpanKindServer))
			_, child := tracer.Start(ctx, "chat sim-fast", trace.WithSpanKind(trace.SpanKindClient))
			child.SetAttributes(
				attribute.String("gen_ai.request.model", "sim-fast"),
				attribute.Int("server.port", 8081),
				attribute.Int64("gen_ai.usage.output_tokens", 40),
				attribute.Float64("tokentap.time_to_first_token", 0.125),
				attribute.Bool("gen_ai.request.stream", true),
				attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop", "length"}),
				attribute.Int64Slice("ints", []int64{1, -2}),
				attribute.Float64Slice("floats", []float64{0.5, 2}),
				attribute.BoolSlice("bools", []bool{false, true}),
			)
			child.SetStatus(codes.Error, "upstream said no")
			child.End()
			parent.End()

			got, err := s.WaitFor(waitCtx(t), func(sp Span) bool { return sp.Name == "chat sim-fast" })
			if err != nil {
				t.Fatal(err)
			}
			par, err := s.WaitFor(waitCtx(t), func(sp Span) bool { return sp.Name == "parent" })
			if err != nil {
				t.Fatal(err)
			}

			wantAttrs := map[string]any{
				"gen_ai.request.model":           "sim-fast",
				"server.port":                    int64(8081),
				"gen_ai.usage.output_tokens":     int64(40),
				"tokentap.time_to_first_token":   0.125,
				"gen_ai.request.stream":          true,
				"gen_ai.response.finish_reasons": []any{"stop", "length"},
				"ints":                           []any{int64(1), int64(-2)},
				"floats":                         []any{0.5, 2.0},
				"bools":                          []any{false, true},
			}
			if !reflect.DeepEqual(got.Attributes, wantAttrs) {
				t.Errorf("attributes:\n got %#v\nwant %#v", got.Attributes, wantAttrs)
			}
			for k, want := range map[string]any{
				"service.name":            "sink-test",
				"service.instance.number": int64(7),
				"deployment.canary":       true,
			} {
				if v := got.Resource[k]; !reflect.DeepEqual(v, want) {
					t.Errorf("resource %s = %#v, want %#v", k, v, want)
				}
			}

			pc, cc := parent.SpanContext(), child.SpanContext()
			for _, c := range []struct{ field, got, want string }{
				{"child kind", got.Kind, "client"},
				{"parent kind", par.Kind, "server"},
				{"scope", got.Scope, "otlpsink/test"},
				{"status code", got.StatusCode, "error"},
				{"status message", got.StatusMessage, "upstream said no"},
				{"parent status code", par.StatusCode, "unset"},
				{"trace id", got.TraceID, cc.TraceID().String()},
				{"span id", got.SpanID, cc.SpanID().String()},
				{"parent span id", got.ParentSpanID, pc.SpanID().String()},
				{"parent's trace id", par.TraceID, pc.TraceID().String()},
				{"root's parent span id", par.ParentSpanID, ""},
			} {
				if c.got != c.want {
					t.Errorf("%s = %q, want %q", c.field, c.got, c.want)
				}
			}
			if got.StartUnixNano == 0 || got.EndUnixNano < got.StartUnixNano {
				t.Errorf("times: start %d, end %d", got.StartUnixNano, got.EndUnixNano)
			}
		})
	}
}

// TestValueTypes covers the OTLP value types the Go SDK never sends (bytes,
// key-value lists, nested arrays, empty values), which other senders do.
func TestValueTypes(t *testing.T) {
	s := startSink(t)
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	str := func(v string) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}
	}
	i64 := func(v int64) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}
	}
	for _, tc := range []struct {
		name string
		in   *commonpb.AnyValue
		want any
	}{
		{"string", str("x"), "x"},
		{"int", i64(-3), int64(-3)},
		{"double", &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 1.5}}, 1.5},
		{"bool", &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}}, true},
		{"bytes", &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0, 1}}}, []byte{0, 1}},
		{"empty", &commonpb.AnyValue{}, nil},
		{"nested array", &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{
			Values: []*commonpb.AnyValue{str("a"), {Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: []*commonpb.AnyValue{i64(1)}}}}},
		}}}, []any{"a", []any{int64(1)}}},
		{"kvlist", &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{
			Values: []*commonpb.KeyValue{{Key: "k", Value: i64(2)}},
		}}}, map[string]any{"k": int64(2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &collectortrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
				Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{{Key: "r", Value: tc.in}}},
				ScopeSpans: []*tracepb.ScopeSpans{{
					Scope: &commonpb.InstrumentationScope{Name: "raw"},
					Spans: []*tracepb.Span{{
						Name:       tc.name,
						TraceId:    []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
						SpanId:     []byte{0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 0, 1},
						Kind:       tracepb.Span_SPAN_KIND_PRODUCER,
						Attributes: []*commonpb.KeyValue{{Key: "v", Value: tc.in}},
					}},
				}},
			}}}
			if _, err := collectortrace.NewTraceServiceClient(conn).Export(waitCtx(t), req); err != nil {
				t.Fatal(err)
			}
			got, err := s.WaitFor(waitCtx(t), func(sp Span) bool { return sp.Name == tc.name })
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Attributes["v"], tc.want) {
				t.Errorf("attribute = %#v, want %#v", got.Attributes["v"], tc.want)
			}
			if !reflect.DeepEqual(got.Resource["r"], tc.want) {
				t.Errorf("resource attribute = %#v, want %#v", got.Resource["r"], tc.want)
			}
			if got.Kind != "producer" || got.Scope != "raw" ||
				got.TraceID != "0102030405060708090a0b0c0d0e0f10" || got.SpanID != "0a0b0c0d0e0f0001" {
				t.Errorf("got kind %q, scope %q, trace %s, span %s", got.Kind, got.Scope, got.TraceID, got.SpanID)
			}
		})
	}
}

// TestWaitForLater checks that WaitFor blocks until a matching span arrives
// and skips spans that do not match, as a smoke test relies on when the
// exporter's batch delay is still running.
func TestWaitForLater(t *testing.T) {
	s := startSink(t)
	tp := newProvider(t, s, resource.Empty())

	type result struct {
		sp  Span
		err error
	}
	done := make(chan result, 1)
	go func() {
		sp, err := s.WaitFor(waitCtx(t), func(sp Span) bool { return sp.Name == "wanted" })
		done <- result{sp, err}
	}()

	_, other := tp.Tracer("t").Start(context.Background(), "other")
	other.End()
	if err := tp.ForceFlush(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	_, wanted := tp.Tracer("t").Start(context.Background(), "wanted")
	wanted.End()

	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.sp.SpanID != wanted.SpanContext().SpanID().String() {
		t.Errorf("got span %s, want %s", r.sp.SpanID, wanted.SpanContext().SpanID())
	}
	if n := len(s.Spans()); n != 2 {
		t.Errorf("Spans() has %d spans, want 2", n)
	}
}

// TestWaitForGivesUp checks that WaitFor ends on a deadline or on Close with
// an error naming what did arrive, so a failing test says why.
func TestWaitForGivesUp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		send    bool
		close   bool
		wantErr error
		wantMsg string
	}{
		{name: "deadline, nothing received", wantErr: context.DeadlineExceeded, wantMsg: "none received"},
		{name: "deadline, other spans received", send: true, wantErr: context.DeadlineExceeded, wantMsg: `"unrelated" (internal, service.name=sink-test)`},
		{name: "closed", close: true, wantErr: ErrClosed, wantMsg: "none received"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startSink(t)
			if tc.send {
				tp := newProvider(t, s, resource.NewSchemaless(attribute.String("service.name", "sink-test")))
				_, sp := tp.Tracer("t").Start(context.Background(), "unrelated")
				sp.End()
				if _, err := s.WaitFor(waitCtx(t), func(Span) bool { return true }); err != nil {
					t.Fatal(err)
				}
			}
			timeout := 200 * time.Millisecond
			if tc.close {
				timeout = time.Minute // Close, not the deadline, must end the wait
				time.AfterFunc(50*time.Millisecond, s.Close)
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			start := time.Now()
			_, err := s.WaitFor(ctx, func(Span) bool { return false })
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("err = %q, want it to contain %q", err, tc.wantMsg)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("WaitFor took %v to give up", d)
			}
		})
	}
}

// TestSpansIsASnapshot checks that callers cannot corrupt the sink or race
// with it through the maps they are handed.
func TestSpansIsASnapshot(t *testing.T) {
	s := startSink(t)
	tp := newProvider(t, s, resource.NewSchemaless(attribute.String("service.name", "a")))
	_, sp := tp.Tracer("t").Start(context.Background(), "s")
	sp.SetAttributes(attribute.StringSlice("list", []string{"x"}))
	sp.End()
	if _, err := s.WaitFor(waitCtx(t), func(Span) bool { return true }); err != nil {
		t.Fatal(err)
	}
	first := s.Spans()
	first[0].Name = "changed"
	first[0].Attributes["list"].([]any)[0] = "changed"
	first[0].Resource["service.name"] = "changed"

	again := s.Spans()[0]
	if again.Name != "s" || again.Attributes["list"].([]any)[0] != "x" || again.Resource["service.name"] != "a" {
		t.Errorf("sink's span changed through a snapshot: %+v", again)
	}
}

// TestConcurrentUse exercises exports, snapshots and waits at once, for the
// race detector.
func TestConcurrentUse(t *testing.T) {
	s := startSink(t)
	tp := newProvider(t, s, resource.Empty())
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, sp := tp.Tracer("t").Start(context.Background(), "span")
			sp.SetAttributes(attribute.Int("i", i))
			sp.End()
		}()
		go func() {
			defer wg.Done()
			_ = s.Spans()
		}()
	}
	wg.Wait()
	if err := tp.ForceFlush(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := s.WaitFor(waitCtx(t), func(sp Span) bool { return sp.Attributes["i"] == int64(i) }); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAddresses(t *testing.T) {
	s := startSink(t)
	host, port, err := net.SplitHostPort(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if host != "127.0.0.1" || port == "0" {
		t.Errorf("Addr() = %q, want 127.0.0.1 and a real port", s.Addr())
	}
	if want := "http://" + s.Addr(); s.Endpoint() != want {
		t.Errorf("Endpoint() = %q, want %q", s.Endpoint(), want)
	}

	// A second sink on the same port must fail, not silently share it.
	if s2, err := Start(s.Addr()); err == nil {
		s2.Close()
		t.Errorf("Start(%q) on a busy port succeeded", s.Addr())
	}
}

// TestCloseLeavesNoGoroutines checks the promise that Close waits for every
// goroutine the sink started, even with an exporter connected to it.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := goleak.IgnoreCurrent()

	s, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(s.Addr()), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	_, sp := tp.Tracer("t").Start(ctx, "s")
	sp.End()
	if _, err := s.WaitFor(ctx, func(Span) bool { return true }); err != nil {
		t.Fatal(err)
	}

	// Close with the exporter's connection still open: graceful stop must
	// not wait for the client to hang up.
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > closeGrace/2 {
		t.Errorf("Close took %v with a connected exporter", d)
	}
	s.Close() // idempotent
	if err := tp.Shutdown(ctx); err != nil {
		t.Errorf("shutting down the tracer provider: %v", err)
	}
	goleak.VerifyNone(t, before)
}
