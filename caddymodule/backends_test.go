package caddymodule

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tokentap/tokentap/internal/exchange"
	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/simulator"
)

// backendsConfig measures the simulator with the options that backends
// read: the conversation id from a request header, and Langfuse's
// completion start.
const backendsConfig = `{
	skip_install_trust
	admin localhost:2999
	http_port 9080
	https_port 9443
}

http://localhost:9080 {
	handle_path /sim/* {
		tokentap {
			conversation_id {http.request.header.X-Session-Id}
			langfuse
		}
		reverse_proxy 127.0.0.1:9081
	}
}

http://:9081 {
	bind 127.0.0.1
	tokentap_simulator {
		time_to_first_token 20ms
		tokens_per_second 500
		output_tokens 8
	}
}
`

// TestBackendAttributesThroughCaddy: conversation_id sets
// gen_ai.conversation.id from the request, and none when the request has
// no value for it; langfuse adds langfuse.observation.completion_start_time,
// a JSON string whose time is the span's start plus its time to first
// token, and none for a response without output.
func TestBackendAttributesThroughCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Caddy")
	}
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{TestRequestTimeout: 30 * time.Second})
	tester.InitServer(backendsConfig, "caddyfile")
	rec := integrationSpans
	tests := []struct {
		name, session string
		status        string // the simulator's, "" for 200
		wantStart     bool
	}{
		{"session header", "sess-42", "", true},
		{"no session header: no conversation id", "", "", true},
		{"error response: no completion start", "sess-43", "503", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(rec.Ended())
			hdr := map[string]string{}
			if tt.session != "" {
				hdr["X-Session-Id"] = tt.session
			}
			if tt.status != "" {
				hdr[simulator.HeaderStatus] = tt.status
			}
			resp, err := tester.Client.Do(simRequest(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, hdr))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			span := waitSpans(t, rec, before+1)[before]
			a := attrs(span)
			if got, ok := a["gen_ai.conversation.id"]; ok != (tt.session != "") || (ok && got.AsString() != tt.session) {
				t.Errorf("gen_ai.conversation.id %v (set %v), want %q", got.AsString(), ok, tt.session)
			}
			checkCompletionStart(t, span, tt.wantStart)
		})
	}
}

// checkCompletionStart checks Langfuse's attribute against the span's own
// start and time to first token.
func checkCompletionStart(t *testing.T, span sdktrace.ReadOnlySpan, want bool) {
	t.Helper()
	a := attrs(span)
	v, ok := a["langfuse.observation.completion_start_time"]
	if ok != want {
		t.Fatalf("langfuse.observation.completion_start_time set %v, want %v (%v)", ok, want, v.AsString())
	}
	if !ok {
		return
	}
	var s string
	if err := json.Unmarshal([]byte(v.AsString()), &s); err != nil {
		t.Fatalf("%q is not a JSON string: %v", v.AsString(), err)
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	ttft := time.Duration(a[attrTimeToFirstToken].AsFloat64() * float64(time.Second))
	if d := at.Sub(span.StartTime().Add(ttft)); d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("completion start %v is %v from the span's start %v plus its time to first token %v", at, d, span.StartTime(), ttft)
	}
}

// startSampler notes what a sampler sees of each span as it starts.
type startSampler struct {
	mu    sync.Mutex
	seen  []sdktrace.SamplingParameters
	inner sdktrace.Sampler
}

func (s *startSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	s.mu.Lock()
	s.seen = append(s.seen, p)
	s.mu.Unlock()
	return s.inner.ShouldSample(p)
}

func (s *startSampler) Description() string { return "startSampler" }

// TestSamplersSeeWhatIsKnownAtStart: the operation, the provider, the
// conversation id, and the model where the API puts it in the path
// (Gemini, Bedrock), are on the
// span when it starts, so a sampler can decide by them; a model in the
// body is not known yet.
func TestSamplersSeeWhatIsKnownAtStart(t *testing.T) {
	tests := []struct {
		name, path, body, wantName, wantModel string
	}{
		{"gemini: model in the path", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
			`{"contents":[]}`, "generate_content gemini-2.5-flash", "gemini-2.5-flash"},
		{"bedrock: model in the path", "/model/anthropic.claude-3-haiku-20240307-v1:0/converse",
			`{"messages":[]}`, "chat anthropic.claude-3-haiku-20240307-v1:0", "anthropic.claude-3-haiku-20240307-v1:0"},
		{"openai: model in the body, not known yet", "/v1/chat/completions",
			`{"model":"gpt-4o-mini"}`, "chat", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := newHarness(t, &Handler{Provider: "test-provider", ConversationID: "{http.request.header.X-Session-Id}"}, func(w http.ResponseWriter, r *http.Request) error {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{}`)
				return nil
			})
			sampler := &startSampler{inner: sdktrace.AlwaysSample()}
			hs.h.cfg.Tracer = otelexport.Tracer(sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSpanProcessor(hs.spans)))
			hs.h.mw = exchange.New(hs.h.cfg)
			req, _ := http.NewRequest("POST", hs.srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Session-Id", "sess-1")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			hs.span(t)
			sampler.mu.Lock()
			defer sampler.mu.Unlock()
			if len(sampler.seen) != 1 {
				t.Fatalf("the sampler saw %d spans start, want 1", len(sampler.seen))
			}
			p := sampler.seen[0]
			got := map[string]string{}
			for _, kv := range p.Attributes {
				got[string(kv.Key)] = kv.Value.Emit()
			}
			if p.Name != tt.wantName || got["gen_ai.request.model"] != tt.wantModel || got["gen_ai.provider.name"] != "test-provider" ||
				got["gen_ai.operation.name"] == "" || got["gen_ai.conversation.id"] != "sess-1" {
				t.Errorf("at start: name %q, attributes %v; want name %q, model %q, provider test-provider, conversation sess-1", p.Name, got, tt.wantName, tt.wantModel)
			}
		})
	}
}
