package exchange

import (
	"bytes"
	"fmt"
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

	"github.com/tokentap/tokentap/internal/meter/tokencount"
	"github.com/tokentap/tokentap/internal/meter/usagecheck"
	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/sink"
)

// TestVerifyUsage serves a Chat Completions stream whose usage the
// upstream reports honestly or doctored, through the middleware with
// verify_usage on every request (and off): the client gets the bytes
// unchanged, the Result carries the check, and the span its attributes.
func TestVerifyUsage(t *testing.T) {
	checkLeaks(t)
	text := strings.Repeat("The median and the tail tell different stories under real load. ", 8)
	o200k, _ := tokencount.New("o200k_base")
	n := o200k.Tokens([]byte(text))
	stream := func(reported int64) []byte {
		var b bytes.Buffer
		for i, w := range strings.Split(text, " ") {
			if i > 0 {
				w = " " + w
			}
			fmt.Fprintf(&b, "data: {\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", w)
		}
		b.WriteString("data: {\"model\":\"gpt-4o-2024-08-06\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
		fmt.Fprintf(&b, "data: {\"model\":\"gpt-4o-2024-08-06\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":%d}}\n\n", reported)
		b.WriteString("data: [DONE]\n\n")
		return b.Bytes()
	}
	on, err := usagecheck.New(1)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		verify   *usagecheck.Verifier
		capture  bool
		reported int64
		want     usagecheck.Status
		mismatch bool
	}{
		{name: "off", verify: nil, reported: n, want: usagecheck.NotSampled},
		{name: "honest upstream", verify: on, reported: n, want: usagecheck.Verified},
		{name: "honest upstream, content captured too", verify: on, capture: true, reported: n, want: usagecheck.Verified},
		{name: "upstream reports half", verify: on, reported: n / 2, want: usagecheck.Verified, mismatch: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := stream(tt.reported)
			upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = w.Write(body)
			}))
			defer upstream.Close()
			target, _ := url.Parse(upstream.URL)
			spans := tracetest.NewSpanRecorder()
			var rows checkRows
			mw := New(Config{
				MaxRequestBody:  4 << 20,
				MaxResponseBody: 4 << 20,
				MaxContentSize:  1 << 20,
				Capture:         tt.capture,
				VerifyUsage:     tt.verify,
				Tracer:          otelexport.Tracer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))),
				Rows:            &rows,
				Sinks:           []Named{{Name: "span", Sink: otelexport.Spans{}}},
			})
			defer mw.Close()
			proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }, FlushInterval: -1}
			srv := httptest.NewServer(mw.Handler(proxy))
			defer srv.Close()
			resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true}}`))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !bytes.Equal(got, body) {
				t.Fatal("the client did not get the upstream's bytes unchanged")
			}
			srv.Close()
			c := rows.check
			if c.Status != tt.want || c.Mismatch != tt.mismatch {
				t.Fatalf("check %+v, want status %s, mismatch %v", c, tt.want, tt.mismatch)
			}
			ended := spans.Ended()
			if len(ended) != 1 {
				t.Fatalf("%d spans", len(ended))
			}
			a := attrs(ended[0])
			v, ok := a[attribute.Key("tokentap.usage.verified.output_tokens")]
			if ok != (tt.want == usagecheck.Verified) {
				t.Fatalf("tokentap.usage.verified.output_tokens present: %v", ok)
			}
			if !ok {
				return
			}
			if v.AsInt64() != n || c.Counted != n || c.Reported != tt.reported {
				t.Errorf("counted %d (span %d), reported %d; want %d, %d", c.Counted, v.AsInt64(), c.Reported, n, tt.reported)
			}
			if a[attribute.Key("tokentap.usage.verified.mismatch")].AsBool() != tt.mismatch {
				t.Errorf("span mismatch flag %v, want %v", a[attribute.Key("tokentap.usage.verified.mismatch")].AsBool(), tt.mismatch)
			}
			if tt.capture && !strings.Contains(a[attribute.Key("gen_ai.output.messages")].AsString(), "median") {
				t.Errorf("content capture lost the text behind the check")
			}
		})
	}
}

// checkRows keeps the last Result's usage check.
type checkRows struct{ check usagecheck.Result }

func (c *checkRows) Record(r *sink.Result) bool {
	c.check = r.UsageCheck
	return false
}
