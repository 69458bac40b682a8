package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// clientsModel is the model every SDK test asks for: a real model name, since
// the simulator answers as whatever model it is asked for.
const clientsModel = "gpt-4o-mini"

// newOpenAIClient is openai-go pointed at base, as a user points it at
// tokentap, with retries off so that each call is exactly one request (and
// one span).
func newOpenAIClient(base string) openai.Client {
	return openai.NewClient(
		option.WithBaseURL(base),
		option.WithAPIKey("sk-tokentap-test"),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(clientsRequestTimeout),
	)
}

// chatResult is what openai-go assembled from one chat completion: what an
// application reads, plus every chunk as the SDK received it.
type chatResult struct {
	ID, Model     string
	Text          string
	FinishReasons []string
	Usage         openai.CompletionUsage
	// Chunks are the raw JSON of the streamed chunks, in order.
	Chunks []string
}

// assembled is the result without the raw chunks, as an application sees it.
func (r chatResult) assembled() chatResult {
	r.Chunks = nil
	return r
}

// received is the raw chunks, for checkSameAsDirect.
func (r chatResult) received() []string { return r.Chunks }

func runChat(t *testing.T, client openai.Client, params openai.ChatCompletionNewParams, stream bool, opts ...option.RequestOption) chatResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientsRequestTimeout)
	defer cancel()
	var c openai.ChatCompletion
	var chunks []string
	if stream {
		s := client.Chat.Completions.NewStreaming(ctx, params, opts...)
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			chunk := s.Current()
			acc.AddChunk(chunk)
			chunks = append(chunks, chunk.RawJSON())
		}
		if err := s.Err(); err != nil {
			t.Fatalf("streaming chat completion: %v", err)
		}
		c = acc.ChatCompletion
	} else {
		res, err := client.Chat.Completions.New(ctx, params, opts...)
		if err != nil {
			t.Fatalf("chat completion: %v", err)
		}
		c = *res
	}
	r := chatResult{ID: c.ID, Model: c.Model, Usage: c.Usage, Chunks: chunks}
	for _, ch := range c.Choices {
		r.Text += ch.Message.Content
		r.FinishReasons = append(r.FinishReasons, ch.FinishReason)
	}
	// Only the fields an application reads are compared: the raw JSON the
	// SDK keeps inside Usage is compared with the chunks.
	r.Usage = openai.CompletionUsage{PromptTokens: c.Usage.PromptTokens, CompletionTokens: c.Usage.CompletionTokens, TotalTokens: c.Usage.TotalTokens}
	return r
}

// TestClientsOpenAIChat points openai-go at tokentap in front of the
// simulator: the SDK assembles the same completion (text, finish reason,
// usage, id, model) from exactly the same chunks as when pointed at the
// simulator directly, and tokentap's span counts the tokens the SDK reports.
func TestClientsOpenAIChat(t *testing.T) {
	tok := startClientsTokentap(t, clientsCaddyfile, clientsProxyURL+"/", clientsSimulatorURL+"/")
	direct := newOpenAIClient(clientsSimulatorURL + "/v1")

	base := openai.ChatCompletionNewParams{
		Model: clientsModel,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are terse."),
			openai.UserMessage("Name three prime numbers."),
		},
	}
	withUsage := base
	withUsage.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}

	tests := []struct {
		name string
		// route is tokentap's route: /sim measures, /inject also asks
		// upstream for usage on the client's behalf.
		route  string
		params openai.ChatCompletionNewParams
		stream bool
		source string
	}{
		{"not streamed", "/sim/v1", base, false, "reported"},
		{"streamed with include_usage", "/sim/v1", withUsage, true, "reported"},
		{"streamed without usage, inject_usage", "/inject/v1", base, true, "injected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := testbin.NewTrace()
			proxied := runChat(t, newOpenAIClient(clientsProxyURL+tt.route), tt.params, tt.stream, option.WithHeader("traceparent", tr.Traceparent()))
			span := tok.span(t, tr)
			want := runChat(t, direct, tt.params, tt.stream)

			checkSameAsDirect(t, proxied, want, "chunks")
			if proxied.Text == "" || proxied.ID == "" || len(proxied.FinishReasons) == 0 {
				t.Fatalf("the SDK assembled an empty completion: %+v", proxied)
			}

			usage := proxied.Usage
			if tt.source == "injected" {
				// The client did not ask for usage, so it must see none:
				// no usage chunk, no "usage":null member. The truth for
				// the span is the usage of the same conversation asked
				// with include_usage.
				if usage.TotalTokens != 0 {
					t.Errorf("the SDK saw usage %+v it did not ask for", usage)
				}
				for _, c := range proxied.Chunks {
					if strings.Contains(c, `"usage"`) {
						t.Errorf("the SDK received a usage member it did not ask for: %s", c)
					}
				}
				usage = runChat(t, direct, withUsage, true).Usage
			}
			if usage.CompletionTokens == 0 {
				t.Fatalf("no usage to compare the span with: %+v", usage)
			}
			wants := []clientsWant{
				{"gen_ai.operation.name", "chat"},
				{"gen_ai.request.model", clientsModel},
				{"gen_ai.response.model", proxied.Model},
				{"gen_ai.response.id", proxied.ID},
				{"gen_ai.response.finish_reasons", clientsAnySlice(proxied.FinishReasons)},
				{"gen_ai.usage.input_tokens", usage.PromptTokens},
				{"gen_ai.usage.output_tokens", usage.CompletionTokens},
				{"tokentap.usage.source", tt.source},
				{"server.port", int64(9346)},
			}
			checkClientsSpan(t, span, tt.stream, wants)
		})
	}
}

// responsesResult is what openai-go gave for one Responses API call.
type responsesResult struct {
	ID, Model, Status string
	Text              string
	InputTokens       int64
	OutputTokens      int64
	// Events are the raw JSON of the streamed events, in order.
	Events []string
}

func (r responsesResult) assembled() responsesResult {
	r.Events = nil
	return r
}

// received is the raw events, for checkSameAsDirect.
func (r responsesResult) received() []string { return r.Events }

func runResponses(t *testing.T, client openai.Client, params responses.ResponseNewParams, stream bool, opts ...option.RequestOption) responsesResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientsRequestTimeout)
	defer cancel()
	var r responsesResult
	var final responses.Response
	if stream {
		s := client.Responses.NewStreaming(ctx, params, opts...)
		var deltas strings.Builder
		for s.Next() {
			ev := s.Current()
			r.Events = append(r.Events, ev.RawJSON())
			switch ev.Type {
			case "response.output_text.delta":
				deltas.WriteString(ev.Delta)
			case "response.completed":
				final = ev.Response
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("streaming response: %v", err)
		}
		if final.ID == "" {
			t.Fatalf("the stream had no response.completed event: %d events", len(r.Events))
		}
		if got := final.OutputText(); got != deltas.String() {
			t.Errorf("the completed response's text %q differs from the streamed deltas %q", got, deltas.String())
		}
	} else {
		res, err := client.Responses.New(ctx, params, opts...)
		if err != nil {
			t.Fatalf("response: %v", err)
		}
		final = *res
	}
	r.ID, r.Model, r.Status, r.Text = final.ID, string(final.Model), string(final.Status), final.OutputText()
	r.InputTokens, r.OutputTokens = final.Usage.InputTokens, final.Usage.OutputTokens
	return r
}

// TestClientsOpenAIResponses does the same for the Responses API, whose
// usage arrives in the response.completed event of a stream.
func TestClientsOpenAIResponses(t *testing.T) {
	tok := startClientsTokentap(t, clientsCaddyfile, clientsProxyURL+"/", clientsSimulatorURL+"/")
	direct := newOpenAIClient(clientsSimulatorURL + "/v1")
	proxy := newOpenAIClient(clientsProxyURL + "/sim/v1")
	params := responses.ResponseNewParams{
		Model: clientsModel,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Describe a lighthouse in one sentence.")},
	}
	for _, mode := range clientsStreamModes {
		stream := mode.stream
		t.Run(mode.name, func(t *testing.T) {
			tr := testbin.NewTrace()
			proxied := runResponses(t, proxy, params, stream, option.WithHeader("traceparent", tr.Traceparent()))
			span := tok.span(t, tr)
			want := runResponses(t, direct, params, stream)

			checkSameAsDirect(t, proxied, want, "events")
			if proxied.Text == "" || proxied.OutputTokens == 0 || proxied.Status != "completed" {
				t.Fatalf("the SDK got an empty or unfinished response: %+v", proxied.assembled())
			}
			wants := []clientsWant{
				{"gen_ai.operation.name", "chat"},
				{"tokentap.dialect", "openai_responses"},
				{"gen_ai.request.model", clientsModel},
				{"gen_ai.response.model", proxied.Model},
				{"gen_ai.response.id", proxied.ID},
				// docs/telemetry.md: a completed response finishes with "stop".
				{"gen_ai.response.finish_reasons", []any{"stop"}},
				{"gen_ai.usage.input_tokens", proxied.InputTokens},
				{"gen_ai.usage.output_tokens", proxied.OutputTokens},
				{"tokentap.usage.source", "reported"},
			}
			checkClientsSpan(t, span, stream, wants)
		})
	}
}

// clientsAnySlice is a string slice as the sink decodes a string array.
func clientsAnySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
