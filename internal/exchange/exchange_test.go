package exchange

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/meter/tokencount"
	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/testutil/streamtest"
	"github.com/tokentap/tokentap/sse"
)

// The kit every in-process exchange test uses (package streamtest).
var (
	checkLeaks = streamtest.CheckLeaks
	post       = streamtest.Post
	attrs      = streamtest.Attrs
)

// streamUpstream writes body as reverse_proxy does (streamtest.Upstream).
func streamUpstream(body []byte, cuts []int) upstreamFunc {
	return streamtest.Upstream(body, cuts)
}

// Attributes the tests read often.
const (
	attrUsageSource      = attribute.Key("tokentap.usage.source")
	attrOutcome          = attribute.Key("tokentap.outcome")
	attrDegradedReason   = attribute.Key("tokentap.degraded.reason")
	attrContentTruncated = attribute.Key("tokentap.content.truncated")
	attrDialect          = attribute.Key("tokentap.dialect")
)

// upstreamFunc stands in for the proxy that Serve wraps: it reads the
// request and writes the response, as reverse_proxy does.
type upstreamFunc func(http.ResponseWriter, *http.Request) error

// harness is one Middleware with its own in-memory span recorder, served
// over a real loopback HTTP server with plain net/http, so that flushing,
// hijacking and client disconnects behave as they do in a server.
type harness struct {
	mw       *Middleware
	spans    *tracetest.SpanRecorder
	srv      *httptest.Server
	upstream upstreamFunc
	// handlerErr receives what Serve returned (or the panic value).
	handlerErr chan any
}

// testEstimator is the tokenizer the exchanges count usage-less streams
// with, as the Caddy handler's default does.
var testEstimator = sync.OnceValue(func() meter.Estimator {
	c, err := tokencount.New("o200k_base")
	if err != nil {
		panic(err)
	}
	if err := c.Load(); err != nil {
		panic(err)
	}
	return c
})

// newHarness serves cfg, filled with what a host would give it: the span
// sink with a recorder of the test's own, the upstream api.openai.com:443,
// the request and response caps and the tokenizer.
func newHarness(t *testing.T, cfg Config, upstream upstreamFunc) *harness {
	t.Helper()
	checkLeaks(t)
	rec := tracetest.NewSpanRecorder()
	cfg.Tracer = otelexport.Tracer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	cfg.Propagator = otelexport.Propagator()
	cfg.Sinks = append(cfg.Sinks, Named{Name: "span", Sink: otelexport.Spans{}})
	if cfg.Host.Upstream == nil {
		cfg.Host.Upstream = func(*http.Request) (string, int) { return "api.openai.com", 443 }
	}
	if cfg.MaxRequestBody == 0 {
		cfg.MaxRequestBody = 4 << 20
	}
	if cfg.MaxResponseBody == 0 {
		cfg.MaxResponseBody = 4 << 20
	}
	if cfg.Estimator == nil {
		cfg.Estimator = testEstimator()
	}
	mw := New(cfg)
	t.Cleanup(mw.Close)
	hs := &harness{mw: mw, spans: rec, upstream: upstream, handlerErr: make(chan any, 1)}
	hs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if rec := recover(); rec != nil {
				hs.handlerErr <- rec
				panic(rec)
			}
		}()
		err := mw.Serve(w, r, hs.upstream)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
		}
		hs.handlerErr <- err
	}))
	t.Cleanup(hs.srv.Close)
	return hs
}

// dialect is the registered dialect name, to force in a Config.
func dialect(t *testing.T, name string) *meter.DialectInfo {
	t.Helper()
	d, ok := meter.LookupDialect(name)
	if !ok {
		t.Fatalf("no dialect %q", name)
	}
	return &d
}

// span waits for the handler to return and gives the one span it ended.
func (hs *harness) span(t *testing.T) sdktrace.ReadOnlySpan {
	t.Helper()
	select {
	case <-hs.handlerErr:
	case <-time.After(5 * time.Second):
		t.Fatal("handler did not return")
	}
	ended := hs.spans.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans ended, want 1", len(ended))
	}
	return ended[0]
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTransparency: for every fixture cut into writes at random points, the
// client receives exactly the bytes upstream sent.
func TestTransparency(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.sse"))
	rnd := rand.New(rand.NewPCG(7, 7))
	for _, f := range files {
		body, _ := os.ReadFile(f)
		for round := 0; round < 3; round++ {
			var cuts []int
			for c := rnd.IntN(50); c < len(body); c += 1 + rnd.IntN(300) {
				cuts = append(cuts, c)
			}
			t.Run(filepath.Base(f), func(t *testing.T) {
				hs := newHarness(t, Config{}, streamUpstream(body, cuts))
				resp := post(t, hs.srv.URL, `{"model":"gpt-4o-mini","stream":true}`)
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatal(err)
				}
				if sha256.Sum256(got) != sha256.Sum256(body) {
					t.Fatalf("client got %d bytes that differ from the %d sent", len(got), len(body))
				}
				hs.span(t)
			})
		}
	}
}

// TestNoBuffering: each event reaches the client before upstream sends the
// next one, so measurement holds nothing back.
func TestNoBuffering(t *testing.T) {
	events := bytes.SplitAfter(fixture(t, "chat_usage.sse"), []byte("\n\n"))
	events = events[:len(events)-1]
	next := make(chan struct{})
	hs := newHarness(t, Config{}, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			_, _ = w.Write(ev)
			_ = http.NewResponseController(w).Flush()
			select {
			case <-next:
			case <-time.After(5 * time.Second):
				return errors.New("client never saw the event")
			}
		}
		return nil
	})
	resp := post(t, hs.srv.URL, `{"model":"gpt-4o-mini","stream":true}`)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i, ev := range events {
		got := make([]byte, len(ev))
		if _, err := io.ReadFull(br, got); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if !bytes.Equal(got, ev) {
			t.Fatalf("event %d differs", i)
		}
		next <- struct{}{}
	}
	s := hs.span(t)
	if a := attrs(s); a[attrOutcome].AsString() != "completed" {
		t.Errorf("outcome %v", a[attrOutcome])
	}
}

// TestSpanContract checks the span against the telemetry contract of
// DESIGN.md: name, kind, parent, every attribute and its unit.
func TestSpanContract(t *testing.T) {
	body := fixture(t, "chat_usage.sse")
	var upstreamTraceparent string
	hs := newHarness(t, Config{}, func(w http.ResponseWriter, r *http.Request) error {
		upstreamTraceparent = r.Header.Get("traceparent")
		return streamUpstream(body, []int{100, 900, 2000})(w, r)
	})
	parent := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req, _ := http.NewRequest("POST", hs.srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"max_tokens":100,"temperature":0.5,"top_p":0.9,"seed":11,"stop":["END"],"n":2,"frequency_penalty":0.5,"presence_penalty":0.25}`))
	req.Header.Set("traceparent", parent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	s := hs.span(t)

	if s.Name() != "chat gpt-4o-mini" || s.SpanKind() != trace.SpanKindClient {
		t.Errorf("name %q kind %v", s.Name(), s.SpanKind())
	}
	if sc := s.InstrumentationScope(); sc.Name != otelexport.InstrumentationName || sc.SchemaURL != otelexport.SchemaURL {
		t.Errorf("scope %q schema %q, want %q %q", sc.Name, sc.SchemaURL, otelexport.InstrumentationName, otelexport.SchemaURL)
	}
	if s.Parent().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("parent %v, want the client's traceparent", s.Parent())
	}
	if want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + s.SpanContext().SpanID().String() + "-01"; upstreamTraceparent != want {
		t.Errorf("upstream traceparent %q, want %q", upstreamTraceparent, want)
	}
	if s.Status().Code != codes.Unset {
		t.Errorf("status %v", s.Status())
	}
	a := attrs(s)
	want := map[string]any{
		"gen_ai.operation.name":                "chat",
		"gen_ai.provider.name":                 "openai",
		"gen_ai.request.model":                 "gpt-4o-mini",
		"gen_ai.request.stream":                true,
		"gen_ai.request.max_tokens":            int64(100),
		"gen_ai.request.temperature":           0.5,
		"gen_ai.request.top_p":                 0.9,
		"gen_ai.request.seed":                  int64(11),
		"gen_ai.request.stop_sequences":        []string{"END"},
		"gen_ai.request.choice.count":          int64(2),
		"gen_ai.request.frequency_penalty":     0.5,
		"gen_ai.request.presence_penalty":      0.25,
		"gen_ai.response.model":                "gpt-4o-mini-2024-07-18",
		"gen_ai.response.id":                   "chatcmpl-CxT8kq2VhY1nN9q0fJ4mZs7bLwPa",
		"gen_ai.response.finish_reasons":       []string{"stop"},
		"gen_ai.usage.input_tokens":            int64(19),
		"gen_ai.usage.output_tokens":           int64(9),
		"gen_ai.usage.cache_read.input_tokens": int64(0),
		"gen_ai.usage.reasoning.output_tokens": int64(0),
		"server.address":                       "api.openai.com",
		"server.port":                          int64(443),
		"http.response.status_code":            int64(200),
		"tokentap.outcome":                     "completed",
		"tokentap.usage.source":                "reported",
		"tokentap.dialect":                     "openai_chat",
		"tokentap.chunks":                      int64(13),
		"tokentap.stalls":                      int64(0),
		"tokentap.inflight":                    int64(0),
	}
	for k, v := range want {
		got, ok := a[attribute.Key(k)]
		if !ok {
			t.Errorf("missing %s", k)
			continue
		}
		if g := got.AsInterface(); !equalValue(g, v) {
			t.Errorf("%s = %#v, want %#v", k, g, v)
		}
	}
	for _, k := range []string{"error.type", "gen_ai.usage.cache_creation.input_tokens"} {
		if _, ok := a[attribute.Key(k)]; ok {
			t.Errorf("%s is set but should not be", k)
		}
	}
	// Durations are float seconds, ordered as the vocabulary defines them.
	secs := func(k string) float64 {
		v, ok := a[attribute.Key(k)]
		if !ok || v.Type() != attribute.FLOAT64 {
			t.Errorf("%s missing or not a float: %v", k, v)
		}
		return v.AsFloat64()
	}
	ttfb, ttfc := secs("tokentap.time_to_first_byte"), secs("gen_ai.response.time_to_first_chunk")
	ttft, ttfvt := secs("tokentap.time_to_first_token"), secs("tokentap.time_to_first_visible_token")
	if !(ttfb > 0 && ttfb <= ttfc && ttfc <= ttft && ttft <= ttfvt && ttfvt < 5) {
		t.Errorf("timings out of order: ttfb %v ttfc %v ttft %v ttfvt %v", ttfb, ttfc, ttft, ttfvt)
	}
	for _, k := range []string{"tokentap.max_chunk_gap", "tokentap.overhead"} {
		if v := secs(k); v < 0 || v > 5 {
			t.Errorf("%s = %v", k, v)
		}
	}
}

func equalValue(got, want any) bool {
	if ws, ok := want.([]string); ok {
		gs, ok := got.([]string)
		return ok && strings.Join(gs, "\x00") == strings.Join(ws, "\x00")
	}
	return got == want
}

// TestJoinsTracingSpan: when Caddy's tracing handler made a span, tokentap's
// span is its child and that span's trace continues upstream.
func TestJoinsTracingSpan(t *testing.T) {
	hs := newHarness(t, Config{}, streamUpstream(fixture(t, "chat_usage.sse"), nil))
	serverTP := sdktrace.NewTracerProvider()
	inner := hs.srv.Config.Handler
	hs.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := serverTP.Tracer("caddy").Start(r.Context(), "handler", trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		// A client traceparent must not win over the tracing span.
		r.Header.Set("traceparent", "00-11111111111111111111111111111111-2222222222222222-01")
		inner.ServeHTTP(w, r.WithContext(ctx))
		w.Header().Set("X-Server-Span", span.SpanContext().SpanID().String())
		w.Header().Set("X-Server-Trace", span.SpanContext().TraceID().String())
	})
	resp := post(t, hs.srv.URL, `{"model":"m","stream":true}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	s := hs.span(t)
	if s.Parent().TraceID().String() == "11111111111111111111111111111111" || !s.Parent().IsValid() {
		t.Errorf("parent %v: want the tracing handler's span", s.Parent())
	}
	if s.Parent().TraceID() != s.SpanContext().TraceID() {
		t.Error("span is not in its parent's trace")
	}
}

// TestUpstreamErrorStatus: a 4xx/5xx with a JSON error body is an upstream
// error named by its status, with no token counts; a 429 or 529 is
// throttled rather than an upstream error.
func TestUpstreamErrorStatus(t *testing.T) {
	for _, status := range []int{400, 429, 500, 503, 529} {
		want := "upstream_error"
		if status == 429 || status == 529 {
			want = "throttled"
		}
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			hs := newHarness(t, Config{}, func(w http.ResponseWriter, r *http.Request) error {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_, _ = w.Write(fixture(t, "../../meter/testdata/openai/error_429.json"))
				return nil
			})
			resp := post(t, hs.srv.URL, `{"model":"gpt-4o","stream":true}`)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != status {
				t.Fatalf("client got %d", resp.StatusCode)
			}
			s := hs.span(t)
			a := attrs(s)
			if a["error.type"].AsString() != strconv.Itoa(status) || a[attrOutcome].AsString() != want {
				t.Errorf("error.type %v outcome %v", a["error.type"], a[attrOutcome])
			}
			if s.Status().Code != codes.Error {
				t.Errorf("status %v", s.Status())
			}
			for k := range a {
				if strings.HasPrefix(string(k), "gen_ai.usage.") {
					t.Errorf("%s is set on an error", k)
				}
			}
			if a[attrUsageSource].AsString() != "absent" {
				t.Errorf("usage source %v", a[attrUsageSource])
			}
		})
	}
}

// TestAbortPanics: reverse_proxy's http.ErrAbortHandler panic still ends the
// span, with the right outcome, and goes on to net/http.
func TestAbortPanics(t *testing.T) {
	events := bytes.SplitAfter(fixture(t, "chat_usage.sse"), []byte("\n\n"))
	t.Run("upstream broke mid-stream", func(t *testing.T) {
		hs := newHarness(t, Config{}, func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range events[:5] {
				_, _ = w.Write(ev)
				_ = http.NewResponseController(w).Flush()
			}
			panic(http.ErrAbortHandler)
		})
		resp := post(t, hs.srv.URL, `{"model":"gpt-4o-mini","stream":true}`)
		_, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Error("client read a complete body from an aborted stream")
		}
		got := <-hs.handlerErr
		hs.handlerErr <- got
		if got != http.ErrAbortHandler {
			t.Errorf("panic %v did not go on", got)
		}
		a := attrs(hs.span(t))
		if a[attrOutcome].AsString() != "upstream_error" || a["error.type"].AsString() != "stream_aborted" {
			t.Errorf("outcome %v error.type %v", a[attrOutcome], a["error.type"])
		}
		if a["gen_ai.usage.output_tokens"].AsInt64() != 4 || a[attrUsageSource].AsString() != "estimated" {
			t.Errorf("partial counts: %v %v", a["gen_ai.usage.output_tokens"], a[attrUsageSource])
		}
	})
	t.Run("client left mid-stream", func(t *testing.T) {
		clientGone := make(chan struct{})
		hs := newHarness(t, Config{}, func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range events[:3] {
				_, _ = w.Write(ev)
				_ = http.NewResponseController(w).Flush()
			}
			<-clientGone
			// reverse_proxy keeps copying until a write fails, then aborts.
			for i := 0; i < 1000; i++ {
				if _, err := w.Write(events[3]); err != nil {
					panic(http.ErrAbortHandler)
				}
				if err := http.NewResponseController(w).Flush(); err != nil {
					panic(http.ErrAbortHandler)
				}
				time.Sleep(time.Millisecond)
			}
			return nil
		})
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", hs.srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","stream":true}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = bufio.NewReader(resp.Body).ReadString('\n')
		cancel()
		resp.Body.Close()
		close(clientGone)
		a := attrs(hs.span(t))
		if a[attrOutcome].AsString() != "client_abort" {
			t.Errorf("outcome %v", a[attrOutcome])
		}
		if _, ok := a["error.type"]; ok {
			t.Errorf("a client leaving is not an upstream error: %v", a["error.type"])
		}
	})
}

// panicDialect fails on every event, standing in for a bug in a dialect.
type panicDialect struct{}

func (panicDialect) Name() string                           { return "test_panic" }
func (panicDialect) Operation(string) string                { return "chat" }
func (panicDialect) Request(*meter.Request, string, []byte) {}
func (panicDialect) Event(*meter.Observer, *sse.Event)      { panic("dialect bug") }
func (panicDialect) Body(*meter.Observer, []byte)           { panic("dialect bug") }

func init() {
	meter.RegisterDialect(meter.DialectInfo{Name: "test_panic", New: func() meter.Dialect { return panicDialect{} }, Provider: "openai"})
}

// TestMeasuringPanicNeverReachesTraffic: a bug in measuring code costs the
// measurement, is counted, and the client still gets every byte.
func TestMeasuringPanicNeverReachesTraffic(t *testing.T) {
	body := fixture(t, "chat_usage.sse")
	before := internalPanics.Load()
	hs := newHarness(t, Config{Dialect: dialect(t, "test_panic")}, streamUpstream(body, []int{10, 500, 1500}))
	resp := post(t, hs.srv.URL, `{"model":"gpt-4o-mini","stream":true}`)
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("client got %d bytes, err %v", len(got), err)
	}
	s := hs.span(t)
	if n := internalPanics.Load() - before; n != 1 {
		t.Errorf("%d panics counted, want 1 (measuring stops after the first)", n)
	}
	if a := attrs(s); a[attrDegradedReason].AsString() != "internal_panic" {
		t.Errorf("degraded reason %v", a[attrDegradedReason])
	}
}

// TestReadFromIsMeasured: io.Copy into the writer goes through Write.
func TestReadFromIsMeasured(t *testing.T) {
	body := fixture(t, "chat_usage.sse")
	hs := newHarness(t, Config{}, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		_, err := io.Copy(w, bytes.NewReader(body))
		return err
	})
	resp := post(t, hs.srv.URL, `{"model":"m","stream":true}`)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, body) {
		t.Fatal("bytes differ")
	}
	if a := attrs(hs.span(t)); a["gen_ai.usage.output_tokens"].AsInt64() != 9 {
		t.Errorf("ReadFrom bypassed the measurement: %v", a["gen_ai.usage.output_tokens"])
	}
}

// TestUpgradePassesThrough: hijacking works through the wrapper chain and
// upgrades are not measured.
func TestUpgradePassesThrough(t *testing.T) {
	hs := newHarness(t, Config{}, func(w http.ResponseWriter, r *http.Request) error {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return err
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nhello")
		return brw.Flush()
	})
	req, _ := http.NewRequest("GET", hs.srv.URL+"/ws", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	<-hs.handlerErr
	if n := len(hs.spans.Ended()); n != 0 {
		t.Errorf("%d spans for an upgrade", n)
	}
}

// TestHijackThroughWrapper: a handler below tokentap can hijack through the
// measuring wrapper (reverse_proxy does this for 101 responses).
func TestHijackThroughWrapper(t *testing.T) {
	hs := newHarness(t, Config{}, func(w http.ResponseWriter, r *http.Request) error {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return err
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		return brw.Flush()
	})
	resp := post(t, hs.srv.URL, `{"model":"m"}`)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != "ok" {
		t.Fatalf("got %q", got)
	}
	hs.span(t)
}

// TestRequestBodyTee: the upstream receives the whole body, however large,
// while tokentap reads the model from the capped copy.
func TestRequestBodyTee(t *testing.T) {
	big := `{"model":"gpt-4o","stream":false,"messages":[{"role":"user","content":"` + strings.Repeat("x", 1<<20) + `"}]}`
	var received int
	hs := newHarness(t, Config{MaxRequestBody: 1024}, func(w http.ResponseWriter, r *http.Request) error {
		b, err := io.ReadAll(r.Body)
		received = len(b)
		if err != nil {
			return err
		}
		w.Header().Set("Content-Type", "application/json")
		_, err = w.Write(fixture(t, "../../meter/testdata/openai/chat_completion.json"))
		return err
	})
	resp := post(t, hs.srv.URL, big)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	s := hs.span(t)
	if received != len(big) {
		t.Errorf("upstream got %d of %d bytes", received, len(big))
	}
	a := attrs(s)
	if s.Name() != "chat gpt-4o" || a["gen_ai.usage.input_tokens"].AsInt64() != 1117 {
		t.Errorf("name %q input tokens %v", s.Name(), a["gen_ai.usage.input_tokens"])
	}
	if _, ok := a["gen_ai.request.stream"]; ok {
		t.Error("gen_ai.request.stream set on a non-streaming request")
	}
}

// TestReusedBuffer: reverse_proxy reuses its copy buffer as soon as Write
// returns; scribbling over it afterwards must not change what is measured.
func TestReusedBuffer(t *testing.T) {
	body := fixture(t, "chat_usage.sse")
	hs := newHarness(t, Config{}, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		buf := make([]byte, 37)
		for off := 0; off < len(body); off += len(buf) {
			n := copy(buf, body[off:])
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
			for i := range buf {
				buf[i] = 'x'
			}
		}
		return nil
	})
	resp := post(t, hs.srv.URL, `{"model":"m","stream":true}`)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, body) {
		t.Fatal("bytes differ")
	}
	a := attrs(hs.span(t))
	if a["gen_ai.usage.output_tokens"].AsInt64() != 9 || a["gen_ai.response.model"].AsString() != "gpt-4o-mini-2024-07-18" || a[attrOutcome].AsString() != "completed" {
		t.Errorf("measurement changed by buffer reuse: %v %v %v", a["gen_ai.usage.output_tokens"], a["gen_ai.response.model"], a[attrOutcome])
	}
}

// TestFlushBeforeHeader: a flush before any header commits 200 once, and the
// exchange is measured as a 200.
func TestFlushBeforeHeader(t *testing.T) {
	hs := newHarness(t, Config{}, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		if err := http.NewResponseController(w).Flush(); err != nil {
			return err
		}
		_, err := w.Write(fixture(t, "chat_usage.sse"))
		return err
	})
	resp := post(t, hs.srv.URL, `{"model":"m","stream":true}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	a := attrs(hs.span(t))
	if resp.StatusCode != 200 || a["http.response.status_code"].AsInt64() != 200 || a[attrOutcome].AsString() != "completed" {
		t.Errorf("status %d, span status %v outcome %v", resp.StatusCode, a["http.response.status_code"], a[attrOutcome])
	}
}

// TestDialectFromMediaType: on a path no dialect claims, the response's
// media type picks the dialect when it is telling (NDJSON is Ollama's).
func TestDialectFromMediaType(t *testing.T) {
	body := fixture(t, "../../meter/testdata/ollama/chat.ndjson")
	hs := newHarness(t, Config{}, func(w http.ResponseWriter, r *http.Request) error {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-ndjson")
		_, err := w.Write(body)
		return err
	})
	resp, err := http.Post(hs.srv.URL+"/gateway/llm", "application/json", strings.NewReader(`{"model":"llama3.2","messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	s := hs.span(t)
	a := attrs(s)
	if a[attrDialect].AsString() != "ollama" || a[attrOutcome].AsString() != "completed" || a[attrUsageSource].AsString() != "reported" {
		t.Errorf("dialect %v outcome %v source %v", a[attrDialect], a[attrOutcome], a[attrUsageSource])
	}
	if s.Name() != "chat llama3.2" || a["gen_ai.usage.output_tokens"].AsInt64() != 10 {
		t.Errorf("name %q output tokens %v", s.Name(), a["gen_ai.usage.output_tokens"])
	}
}
