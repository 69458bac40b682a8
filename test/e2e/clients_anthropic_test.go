package e2e

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// clientsAnthropicModel is the model the Anthropic tests ask for.
const clientsAnthropicModel = "claude-sonnet-4-5"

// messageResult is what anthropic-sdk-go assembled from one Messages call:
// what an application reads, plus every event as the SDK received it.
type messageResult struct {
	ID, Model, StopReason string
	Text                  string
	InputTokens           int64
	CacheReadTokens       int64
	CacheCreationTokens   int64
	OutputTokens          int64
	// Events are the raw JSON of the streamed events, in order.
	Events []string
}

func (r messageResult) assembled() messageResult {
	r.Events = nil
	return r
}

// received is the raw events, for checkSameAsDirect.
func (r messageResult) received() []string { return r.Events }

// newAnthropicClient is anthropic-sdk-go pointed at base (the API root,
// without /v1, as ANTHROPIC_BASE_URL is), with retries off.
func newAnthropicClient(base string) anthropic.Client {
	return anthropic.NewClient(
		option.WithBaseURL(base),
		option.WithAPIKey("sk-ant-tokentap-test"),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(clientsRequestTimeout),
	)
}

func runMessage(t *testing.T, client anthropic.Client, params anthropic.MessageNewParams, stream bool, opts ...option.RequestOption) messageResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientsRequestTimeout)
	defer cancel()
	var m anthropic.Message
	var r messageResult
	if stream {
		s := client.Messages.NewStreaming(ctx, params, opts...)
		for s.Next() {
			ev := s.Current()
			r.Events = append(r.Events, ev.RawJSON())
			if err := m.Accumulate(ev); err != nil {
				t.Fatalf("accumulating event %s: %v", ev.RawJSON(), err)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("streaming message: %v", err)
		}
	} else {
		res, err := client.Messages.New(ctx, params, opts...)
		if err != nil {
			t.Fatalf("message: %v", err)
		}
		m = *res
	}
	r.ID, r.Model, r.StopReason = m.ID, string(m.Model), string(m.StopReason)
	for _, block := range m.Content {
		r.Text += block.Text
	}
	u := m.Usage
	r.InputTokens, r.CacheReadTokens, r.CacheCreationTokens, r.OutputTokens =
		u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens
	return r
}

// TestClientsAnthropicMessages points anthropic-sdk-go at tokentap in front
// of the simulator: the SDK assembles the same message from the same events
// as directly, and the span counts the tokens the SDK reports.
func TestClientsAnthropicMessages(t *testing.T) {
	tok := startClientsTokentap(t, clientsCaddyfile, clientsProxyURL+"/", clientsSimulatorURL+"/")
	direct := newAnthropicClient(clientsSimulatorURL)
	proxy := newAnthropicClient(clientsProxyURL + "/sim")
	params := anthropic.MessageNewParams{
		Model:     clientsAnthropicModel,
		MaxTokens: 256,
		Messages: []anthropic.MessageParam{
			anthropic.NewUserMessage(anthropic.NewTextBlock("Write a haiku about proxies.")),
		},
	}
	for _, mode := range clientsStreamModes {
		stream := mode.stream
		t.Run(mode.name, func(t *testing.T) {
			tr := testbin.NewTrace()
			proxied := runMessage(t, proxy, params, stream, option.WithHeader("traceparent", tr.Traceparent()))
			span := tok.span(t, tr)
			want := runMessage(t, direct, params, stream)

			checkSameAsDirect(t, proxied, want, "events")
			if proxied.Text == "" || proxied.OutputTokens == 0 || proxied.StopReason == "" {
				t.Fatalf("the SDK assembled an empty or unfinished message: %+v", proxied.assembled())
			}
			wants := []clientsWant{
				{"gen_ai.operation.name", "chat"},
				{"gen_ai.provider.name", "anthropic"},
				{"tokentap.dialect", "anthropic_messages"},
				{"gen_ai.request.model", clientsAnthropicModel},
				{"gen_ai.request.max_tokens", int64(256)},
				{"gen_ai.response.model", proxied.Model},
				{"gen_ai.response.id", proxied.ID},
				{"gen_ai.response.finish_reasons", []any{proxied.StopReason}},
				// semconv: input tokens include the cached ones, which
				// Anthropic counts apart.
				{"gen_ai.usage.input_tokens", proxied.InputTokens + proxied.CacheReadTokens + proxied.CacheCreationTokens},
				{"gen_ai.usage.output_tokens", proxied.OutputTokens},
				{"tokentap.usage.source", "reported"},
			}
			checkClientsSpan(t, span, stream, wants)
		})
	}
}
