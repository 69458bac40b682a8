package exchange

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/sink"
)

// TestHandlerBeforeStdlibProxy: Middleware.Handler in front of the
// standard library's httputil.ReverseProxy, with no Caddy anywhere, passes
// a streamed chat completion through byte for byte and measures it as the
// Caddy handler does: the exchange is plain net/http middleware.
func TestHandlerBeforeStdlibProxy(t *testing.T) {
	checkLeaks(t)
	body := fixture(t, "chat_usage.sse")
	events := bytes.SplitAfter(body, []byte("\n\n"))
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			_, _ = w.Write(ev)
			_ = http.NewResponseController(w).Flush()
		}
	}))
	defer upstream.Close()
	target, _ := url.Parse(upstream.URL)

	spans := tracetest.NewSpanRecorder()
	var rows countingRows
	mw := New(Config{
		MaxRequestBody:  4 << 20,
		MaxResponseBody: 4 << 20,
		Tracer:          otelexport.Tracer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))),
		Rows:            &rows,
		Sinks:           []Named{{Name: "span", Sink: otelexport.Spans{}}},
	})
	defer mw.Close()
	proxy := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target) },
		FlushInterval: -1,
	}
	srv := httptest.NewServer(mw.Handler(proxy))
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("client got %d bytes (err %v), want the upstream's %d unchanged", len(got), err, len(body))
	}
	srv.Close() // waits for the handler, and so for the finish
	ended := spans.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans, want 1", len(ended))
	}
	a := attrs(ended[0])
	for k, want := range map[string]any{
		"gen_ai.request.model":       "gpt-4o-mini",
		"gen_ai.response.model":      "gpt-4o-mini-2024-07-18",
		"gen_ai.usage.input_tokens":  int64(19),
		"gen_ai.usage.output_tokens": int64(9),
		"tokentap.outcome":           "completed",
		"tokentap.usage.source":      "reported",
		"tokentap.chunks":            int64(13),
	} {
		if g := a[attribute.Key(k)].AsInterface(); g != want {
			t.Errorf("%s = %v, want %v", k, g, want)
		}
	}
	if a["tokentap.time_to_first_token"].AsFloat64() <= 0 {
		t.Error("no time to first token")
	}
	if rows.n != 1 || rows.model != "gpt-4o-mini-2024-07-18" {
		t.Errorf("rows got %d results (model %q), want 1", rows.n, rows.model)
	}
}

// countingRows is a Rows that counts what it was given.
type countingRows struct {
	n     int
	model string
}

func (c *countingRows) Record(r *sink.Result) bool {
	c.n++
	c.model = r.Model()
	return false
}
