//go:build linux

package e2e

import (
	"compress/gzip"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

const (
	langfuseHost = "cloud.langfuse.com"
	// langfusePublic and langfuseSecret stand for the reader's keys.
	langfusePublic = "pk-lf-e2e"
	langfuseSecret = "sk-lf-e2e"
)

// TestLangfuseReadme runs the commands of examples/langfuse/README.md as
// written, in a network namespace where cloud.langfuse.com resolves to a
// local HTTPS server on port 443 with a certificate for that name, which
// reads OTLP/HTTP protobuf at Langfuse's path. That checks the documented
// environment as far as it can be without Langfuse: the protocol, the
// endpoint and the path the exporter appends, TLS, basic authentication
// with the keys, the ingestion version header, no metrics pushed; and the
// span as Langfuse reads it: model, usage, and a completion start that
// Langfuse's parser takes (JSON) at the first token.
func TestLangfuseReadme(t *testing.T) {
	rec := &otlpHTTPStandIn{path: "/api/public/otel/v1/traces"}
	runReadmeAgainst(t, "langfuse", langfuseHost, func(ln net.Listener, cert tls.Certificate) { serveStandIn(t, ln, cert, rec) },
		"LANGFUSE_PUBLIC_KEY="+langfusePublic, "LANGFUSE_SECRET_KEY="+langfuseSecret)

	wantAuth := "Basic " + base64.StdEncoding.EncodeToString([]byte(langfusePublic+":"+langfuseSecret))
	deadline := time.Now().Add(jaegerTraceTimeout)
	for {
		if s, ok := rec.span("chat sim-fast"); ok {
			if auth, version := s.header.Get("Authorization"), s.header.Get("X-Langfuse-Ingestion-Version"); auth != wantAuth || version != "4" {
				t.Errorf("export headers Authorization %q, x-langfuse-ingestion-version %q; want %q, 4", auth, version, wantAuth)
			}
			if s.attrs["gen_ai.request.model"] != "sim-fast" || s.attrs["gen_ai.usage.output_tokens"] != "40" {
				t.Errorf("model %q, output tokens %q; want sim-fast, 40", s.attrs["gen_ai.request.model"], s.attrs["gen_ai.usage.output_tokens"])
			}
			var start string
			if err := json.Unmarshal([]byte(s.attrs["langfuse.observation.completion_start_time"]), &start); err != nil {
				t.Fatalf("langfuse.observation.completion_start_time %q: Langfuse's JSON.parse would fail: %v", s.attrs["langfuse.observation.completion_start_time"], err)
			}
			at, err := time.Parse(time.RFC3339Nano, start)
			if err != nil {
				t.Fatal(err)
			}
			var ttft float64
			if err := json.Unmarshal([]byte(s.attrs["tokentap.time_to_first_token"]), &ttft); err != nil {
				t.Fatalf("tokentap.time_to_first_token %q: %v", s.attrs["tokentap.time_to_first_token"], err)
			}
			want := s.start.Add(time.Duration(ttft * float64(time.Second)))
			if d := at.Sub(want); d < -time.Microsecond || d > time.Microsecond {
				t.Errorf("completion start %v, want the span's start plus its time to first token, %v", at, want)
			}
			if p := rec.otherPaths(); len(p) > 0 {
				t.Errorf("exports to %v besides the traces: Langfuse takes no OTLP metrics", p)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("within %v the stand-in for %s received no span chat sim-fast (paths %v)", jaegerTraceTimeout, langfuseHost, rec.otherPaths())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// standInSpan is what a stand-in keeps of each span: its attributes as
// strings (numbers in JSON), its start, and the headers of its export.
type standInSpan struct {
	name   string
	start  time.Time
	attrs  map[string]string
	header http.Header
}

// otlpHTTPStandIn reads OTLP/HTTP protobuf at a backend's traces path, as
// the backend does, and notes every other path it is sent to.
type otlpHTTPStandIn struct {
	path  string
	mu    sync.Mutex
	spans []standInSpan
	other []string
}

func (r *otlpHTTPStandIn) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != r.path {
		r.mu.Lock()
		r.other = append(r.other, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
		http.NotFound(w, req)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(io.LimitReader(body, 16<<20))
	var ex collectortrace.ExportTraceServiceRequest
	if err != nil || req.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(b, &ex) != nil {
		http.Error(w, "want OTLP protobuf", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	for _, rs := range ex.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s := standInSpan{
					name: sp.GetName(), header: req.Header.Clone(),
					start: time.Unix(0, int64(sp.GetStartTimeUnixNano())), attrs: map[string]string{},
				}
				for _, kv := range sp.GetAttributes() {
					s.attrs[kv.GetKey()] = anyValueString(kv.GetValue())
				}
				r.spans = append(r.spans, s)
			}
		}
	}
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *otlpHTTPStandIn) span(name string) (standInSpan, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.spans {
		if s.name == name {
			return s, true
		}
	}
	return standInSpan{}, false
}

func (r *otlpHTTPStandIn) otherPaths() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.other...)
}

// serveStandIn serves rec over TLS with cert on ln until the test ends.
func serveStandIn(t *testing.T, ln net.Listener, cert tls.Certificate, rec http.Handler) {
	srv := &http.Server{Handler: rec, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
}

// anyValueString is an attribute's value as text: strings as they are,
// numbers and booleans as JSON.
func anyValueString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		b, _ := json.Marshal(x.IntValue)
		return string(b)
	case *commonpb.AnyValue_DoubleValue:
		b, _ := json.Marshal(x.DoubleValue)
		return string(b)
	case *commonpb.AnyValue_BoolValue:
		b, _ := json.Marshal(x.BoolValue)
		return string(b)
	}
	return ""
}
