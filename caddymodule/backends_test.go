package caddymodule

import (
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/tokentap/tokentap/simulator"
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
