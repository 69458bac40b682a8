package exchange

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/live"
	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/stats"
)

// discardWriter is a ResponseWriter that costs nothing, so the benchmarks
// below measure tokentap's own work.
type discardWriter struct {
	h http.Header
	// write, when set, sees each write, for a test.
	write func([]byte)
}

func (d *discardWriter) Header() http.Header { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) {
	if d.write != nil {
		d.write(p)
	}
	return len(p), nil
}
func (d *discardWriter) WriteHeader(int) {}

// Flush makes it a Flusher, as the client's writer is: flushing costs
// nothing, and does not fail as it would on a writer that cannot.
func (d *discardWriter) Flush() {}

// BenchmarkWrite compares one SSE event written through tokentap's writer
// (forward, then decode and read the event) with the same event written
// through a bare wrapper, the struct embedding the ResponseWriter that
// every Caddy middleware uses (caddyhttp.ResponseWriterWrapper). The
// difference is what tokentap adds to each Write on the proxy's hot path.
func BenchmarkWrite(b *testing.B) {
	events := bytes.SplitAfter(fixture(b, "chat_usage.sse"), []byte("\n\n"))
	content := events[2]
	b.Run("bare-wrapper", func(b *testing.B) {
		w := &bareWrapper{ResponseWriter: &discardWriter{h: http.Header{}}}
		b.SetBytes(int64(len(content)))
		b.ReportAllocs()
		for b.Loop() {
			_, _ = w.Write(content)
		}
	})
	b.Run("tokentap", func(b *testing.B) {
		ww, x := benchWriter(b)
		_, _ = ww.Write(events[0])
		b.SetBytes(int64(len(content)))
		b.ReportAllocs()
		for b.Loop() {
			_, _ = ww.Write(content)
		}
		b.StopTimer()
		x.finish(0, "")
	})
	// As reverse_proxy streams: each event written, then flushed. The event
	// waits only for what runs between its Write and its flush,
	// before-flush-ns/op (the forward and a copy); the measuring runs after
	// the flush.
	b.Run("tokentap-write-then-flush", func(b *testing.B) {
		ww, x := benchWriter(b)
		_, _ = ww.Write(events[0])
		b.SetBytes(int64(len(content)))
		b.ReportAllocs()
		var before time.Duration
		for b.Loop() {
			t := time.Now()
			_, _ = ww.Write(content)
			before += time.Since(t)
			_ = ww.FlushError()
		}
		b.ReportMetric(float64(before.Nanoseconds())/float64(b.N), "before-flush-ns/op")
		b.StopTimer()
		x.finish(0, "")
	})
}

// BenchmarkExchange is the per-request cost: span start and end, request
// body tee, header handling, a 13-event stream and the finish.
func BenchmarkExchange(b *testing.B) {
	body := fixture(b, "chat_usage.sse")
	events := bytes.SplitAfter(body, []byte("\n\n"))
	mw := benchMiddleware(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		streamExchange(mw, events).finish(0, "")
	}
}

// bareWrapper is the wrapper every Caddy middleware uses.
type bareWrapper struct{ http.ResponseWriter }

// streamExchange runs one request through mw as Serve does, up to its
// finish: begin, prepare, the events written, what was held measured and
// the writer's buffer given back. The caller finishes the exchange.
func streamExchange(mw *Middleware, events [][]byte) *exchange {
	r := benchRequest()
	x := mw.begin(r)
	x.prepare(r)
	w := &responseWriter{ResponseWriter: &discardWriter{h: http.Header{"Content-Type": {"text/event-stream"}}}, x: x}
	for _, ev := range events {
		_, _ = w.Write(ev)
	}
	w.end()
	return x
}

// BenchmarkRequestSetup is the part of BenchmarkExchange that is not
// tokentap's: building the request. BenchmarkExchange less this is
// tokentap's share of a request.
func BenchmarkRequestSetup(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = benchRequest()
	}
}

// benchMiddleware is a Middleware with what the Caddy handler gives it by
// default, but for Caddy's access log: the live stats, the span and the
// metrics, and the tokenizer.
func benchMiddleware(b testing.TB) *Middleware {
	b.Helper()
	p, release, err := otelexport.AcquireMeterProvider(context.Background(), zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{
		MaxRequestBody:  4 << 20,
		MaxResponseBody: 4 << 20,
		Estimator:       testEstimator(),
		// A live stats store of the benchmark's own, doing the
		// process-wide one's work without its health log: the
		// benchmarks' synthetic streams swing by orders of magnitude and
		// would print a change between results.
		Rows: stats.Recorder{Store: stats.NewStore(stats.Options{})},
		// The requests in flight, as the handler keeps them.
		Live: new(live.Table),
		// A recording provider, so span attributes are really built and
		// each ended span is snapshotted, as for an exporter; the
		// processor keeps none, so the heap does not grow with b.N.
		Tracer:     otelexport.Tracer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discardSpans{}))),
		Propagator: otelexport.Propagator(),
		Sinks:      []Named{{Name: "span", Sink: otelexport.Spans{}}},
		Host: Host{Upstream: func(*http.Request) (string, int) {
			return "api.openai.com", 443
		}},
		Release: release,
	}
	if p.Instruments.Enabled() {
		cfg.Sinks = append(cfg.Sinks, Named{Name: "metrics", Sink: p.Instruments})
	}
	mw := New(cfg)
	b.Cleanup(mw.Close)
	return mw
}

// discardSpans is a span processor that lets every span go.
type discardSpans struct{}

func (discardSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discardSpans) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discardSpans) Shutdown(context.Context) error                  { return nil }
func (discardSpans) ForceFlush(context.Context) error                { return nil }

func benchRequest() *http.Request {
	r, _ := http.NewRequest("POST", "http://localhost/v1/chat/completions", bytes.NewReader([]byte(`{"model":"gpt-4o-mini","stream":true}`)))
	return r
}

func benchWriter(b testing.TB) (*responseWriter, *exchange) {
	mw := benchMiddleware(b)
	r := benchRequest()
	x := mw.begin(r)
	x.prepare(r)
	dw := &discardWriter{h: http.Header{"Content-Type": {"text/event-stream"}}}
	return &responseWriter{ResponseWriter: dw, x: x}, x
}

// BenchmarkFinish is the per-request work after the stream, alone: the
// meter's finish, the span's attributes and end, the metric points and
// the live stats, for a completed stream with reported usage. Only the finish is timed and counted: exchanges are streamed with
// the timer stopped, finishBatch at a time, and then finished in a row, so
// that stopping the timer (which stops the world to read the memory
// statistics) is not paid per finish.
func BenchmarkFinish(b *testing.B) {
	const finishBatch = 256
	body := fixture(b, "chat_usage.sse")
	events := bytes.SplitAfter(body, []byte("\n\n"))
	mw := benchMiddleware(b)
	xs := make([]*exchange, 0, finishBatch)
	b.ReportAllocs()
	b.StopTimer()
	for done := 0; done < b.N; {
		xs = xs[:0]
		for range min(finishBatch, b.N-done) {
			xs = append(xs, streamExchange(mw, events))
		}
		b.StartTimer()
		for _, x := range xs {
			x.finish(0, "")
		}
		b.StopTimer()
		done += len(xs)
	}
}
