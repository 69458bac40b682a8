package caddymodule

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tokentap/tokentap/internal/exchange"
	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/testutil/streamtest"
)

// The kit every in-process exchange test uses (package streamtest).
var (
	checkLeaks = streamtest.CheckLeaks
	post       = streamtest.Post
	attrs      = streamtest.Attrs
)

// streamUpstream writes body as reverse_proxy does (streamtest.Upstream).
func streamUpstream(body []byte, cuts []int) caddyhttp.HandlerFunc {
	return streamtest.Upstream(body, cuts)
}

// integrationSpans records the spans of the handlers that a real Caddy
// provisions in integration tests; they get their provider through the
// shared, reference-counted path, which the override feeds.
var integrationSpans = tracetest.NewSpanRecorder()

func TestMain(m *testing.M) {
	otelexport.TracerProviderOverride = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(integrationSpans))
	os.Exit(m.Run())
}

// harness is one provisioned Handler with its own in-memory span recorder,
// served over a real loopback HTTP server with Caddy's request set-up
// (its replacer, reverse_proxy's upstream placeholders), for what the
// module adds to package exchange: its configuration, placeholders and
// sinks. Through-Caddy tests use a real Caddy instead.
type harness struct {
	h        *Handler
	spans    *tracetest.SpanRecorder
	srv      *httptest.Server
	upstream caddyhttp.HandlerFunc
	// handlerErr receives what ServeHTTP returned (or the panic value).
	handlerErr chan any
}

func newHarness(t *testing.T, h *Handler, upstream caddyhttp.HandlerFunc) *harness {
	t.Helper()
	checkLeaks(t)
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := h.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	// Each unit test sees only its own spans.
	rec := tracetest.NewSpanRecorder()
	h.cfg.Tracer = otelexport.Tracer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	h.mw = exchange.New(h.cfg)
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Cleanup() })
	hs := &harness{h: h, spans: rec, upstream: upstream, handlerErr: make(chan any, 1)}
	hs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		repl := caddy.NewReplacer()
		repl.Set("http.reverse_proxy.upstream.host", "api.openai.com")
		repl.Set("http.reverse_proxy.upstream.port", "443")
		r = caddyhttp.PrepareRequest(r, repl, w, &caddyhttp.Server{})
		defer func() {
			if rec := recover(); rec != nil {
				hs.handlerErr <- rec
				panic(rec)
			}
		}()
		err := h.ServeHTTP(w, r, hs.upstream)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
		}
		hs.handlerErr <- err
	}))
	t.Cleanup(hs.srv.Close)
	return hs
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

// fixture reads a stream the exchange's own tests use (or, relative to
// them, another package's testdata).
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "exchange", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUpstreamDown: reverse_proxy returns an error and never writes; the
// span says why, and the error reaches Caddy unchanged.
func TestUpstreamDown(t *testing.T) {
	want := caddyhttp.Error(http.StatusBadGateway, errors.New("dial tcp: connection refused"))
	hs := newHarness(t, &Handler{}, func(w http.ResponseWriter, r *http.Request) error { return want })
	resp := post(t, hs.srv.URL, `{"model":"gpt-4o"}`)
	resp.Body.Close()
	select {
	case got := <-hs.handlerErr:
		hs.handlerErr <- got
		if !errors.Is(got.(error), want.Err) {
			t.Errorf("handler returned %v, want %v", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("handler did not return")
	}
	a := attrs(hs.span(t))
	if a["error.type"].AsString() != "502" || a[attrOutcome].AsString() != "upstream_error" {
		t.Errorf("error.type %v outcome %v", a["error.type"], a[attrOutcome])
	}
}
