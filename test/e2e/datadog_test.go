//go:build linux

package e2e

import (
	"crypto/tls"
	"net"
	"testing"
	"time"
)

const (
	datadogHost = "otlp.datadoghq.com"
	// datadogKey stands for the reader's DD_API_KEY.
	datadogKey = "e2e-datadog-key"
)

// TestDatadogReadme runs the commands of examples/datadog/README.md as
// written, in a network namespace where otlp.datadoghq.com resolves to a
// local HTTPS server on port 443 with a certificate for that name, which
// reads OTLP/HTTP protobuf at /v1/traces as Datadog's intake does. That
// checks the documented environment as far as it can be without Datadog:
// the protocol, the endpoint used as written, TLS, the API key and the
// LLM Observability source header, no metrics pushed, and the GenAI
// attributes LLM Observability maps.
func TestDatadogReadme(t *testing.T) {
	rec := &otlpHTTPStandIn{path: "/v1/traces"}
	runReadmeAgainst(t, "datadog", datadogHost, func(ln net.Listener, cert tls.Certificate) { serveStandIn(t, ln, cert, rec) },
		"DD_API_KEY="+datadogKey)

	deadline := time.Now().Add(jaegerTraceTimeout)
	for {
		if s, ok := rec.span("chat sim-fast"); ok {
			if key, source := s.header.Get("Dd-Api-Key"), s.header.Get("Dd-Otlp-Source"); key != datadogKey || source != "llmobs" {
				t.Errorf("export headers dd-api-key %q, dd-otlp-source %q; want %q, llmobs", key, source, datadogKey)
			}
			for k, want := range map[string]string{
				"gen_ai.operation.name":      "chat",
				"gen_ai.provider.name":       "openai",
				"gen_ai.request.model":       "sim-fast",
				"gen_ai.response.model":      "sim-fast",
				"gen_ai.usage.output_tokens": "40",
			} {
				if got := s.attrs[k]; got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			if s.attrs["gen_ai.usage.input_tokens"] == "" {
				t.Error("no gen_ai.usage.input_tokens")
			}
			if p := rec.otherPaths(); len(p) > 0 {
				t.Errorf("exports to %v besides the traces", p)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("within %v the stand-in for %s received no span chat sim-fast (other paths %v)", jaegerTraceTimeout, datadogHost, rec.otherPaths())
		}
		time.Sleep(250 * time.Millisecond)
	}
}
