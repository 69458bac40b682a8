package e2e

import (
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// clientsSLOCaddyfile is clientsCaddyfile with a route whose model
// objective every request misses (a first token within a nanosecond), and
// on which a request may state its own (slo_headers).
var clientsSLOCaddyfile = strings.Replace(clientsCaddyfile, "\thandle_path /inject/* {", `	handle_path /slo/* {
		tokentap {
			slo ttft 1ns
			slo_headers
		}
		reverse_proxy 127.0.0.1:`+clientsSimulatorPort+`
	}
	handle_path /inject/* {`, 1)

// TestClientsRequestObjective: the official OpenAI SDK states an objective
// per request with its own header option, through the built binary; the
// request is judged against it instead of the route's, and the verdict
// and its source are on the span the binary exports.
func TestClientsRequestObjective(t *testing.T) {
	if !strings.Contains(clientsSLOCaddyfile, "handle_path /slo/*") {
		t.Fatal("the /slo route was not added to the clients' Caddyfile")
	}
	tok := startClientsTokentap(t, clientsSLOCaddyfile, clientsProxyURL+"/", clientsSimulatorURL+"/")
	params := openai.ChatCompletionNewParams{
		Model:         clientsModel,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Name three prime numbers.")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	tests := []struct {
		name    string
		headers map[string]string
		met     bool
		source  string
	}{
		{"the route's objective: missed", nil, false, "config"},
		{"its own time to first token, a minute: met", map[string]string{"X-Slo-Ttft-Ms": "60000"}, true, "request"},
		{"its own time per output token, a millisecond: missed at the simulator's 400 tokens/s", map[string]string{"X-Slo-Tpot-Ms": "1"}, false, "request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := testbin.NewTrace()
			opts := []option.RequestOption{option.WithHeader("traceparent", tr.Traceparent())}
			for k, v := range tt.headers {
				opts = append(opts, option.WithHeader(k, v))
			}
			got := runChat(t, newOpenAIClient(clientsProxyURL+"/slo/v1"), params, true, opts...)
			if got.Text == "" {
				t.Fatalf("the SDK assembled an empty completion: %+v", got)
			}
			a := tok.span(t, tr).Attributes
			if a["tokentap.slo.met"] != tt.met || a["tokentap.slo.source"] != tt.source {
				t.Errorf("tokentap.slo.met %v, tokentap.slo.source %v; want %v, %q", a["tokentap.slo.met"], a["tokentap.slo.source"], tt.met, tt.source)
			}
		})
	}
}
