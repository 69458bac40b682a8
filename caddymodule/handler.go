// Package caddymodule puts tokentap into Caddy: the http.handlers.tokentap
// middleware and its Caddyfile directive, which resolve their configuration
// into an exchange.Config at provisioning and hand every request to
// package exchange; what only Caddy can answer (host.go); the access log
// sink; the live stats' admin API, page and `tokentap stats` command; and
// the tokentap_probe app. The measuring itself knows nothing of Caddy.
package caddymodule

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/tokentap/tokentap/internal/drift"
	"github.com/tokentap/tokentap/internal/exchange"
	"github.com/tokentap/tokentap/internal/meter"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Defaults of the Handler's configuration.
const (
	DefaultMaxRequestBody  = 4 << 20
	DefaultMaxResponseBody = 4 << 20
)

// Handler measures the LLM API exchanges that pass through it and exports one
// OpenTelemetry span per exchange. It sits in front of reverse_proxy and is
// transparent: every byte of the response reaches the client unchanged and
// at the same moment it would have without tokentap, and measurement faults
// degrade the measurement, never the traffic.
//
// Traces are exported over OTLP (gRPC by default) and configured with the
// standard OTEL_* environment variables (docs/telemetry.md, "Export
// configuration").
type Handler struct {
	// Provider sets gen_ai.provider.name (e.g. "openai", "anthropic",
	// "gcp.gemini"). Default: inferred from the upstream host when it is a
	// known provider's, else from the dialect (OpenAI-compatible servers
	// are "openai").
	Provider string `json:"provider,omitempty"`

	// Dialect forces the API format used to read the exchange instead of
	// choosing it from the request path: "openai_chat",
	// "openai_responses", "anthropic_messages", "gemini", "ollama",
	// "cohere_chat", "tgi", "bedrock_converse" or "bedrock_invoke".
	// Default: automatic.
	Dialect string `json:"dialect,omitempty"`

	// MaxRequestBody is how many bytes of the request body are copied, as
	// the upload passes, to read the model and parameters. The upload
	// itself is never held back or limited. Default: 4 MiB.
	MaxRequestBody int64 `json:"max_request_body,omitempty"`

	// MaxResponseBody is how many bytes of a non-streamed (JSON) response
	// are kept to read its usage at the end; past it the usage of that
	// response is not measured and the fault is counted. Default: 4 MiB.
	MaxResponseBody int64 `json:"max_response_body,omitempty"`

	// MaxEventSize caps one streamed event; a larger event is skipped by
	// the measurement (never by the traffic) and counted. Default: 1 MiB.
	MaxEventSize int64 `json:"max_event_size,omitempty"`

	// StallThreshold is the gap between two streamed chunks that counts as
	// a stall in tokentap.stalls. Default: 1s.
	StallThreshold caddy.Duration `json:"stall_threshold,omitempty"`

	// InjectUsage makes OpenAI-style streaming requests that lack
	// stream_options.include_usage ask for it upstream, so token counts are
	// exact (tokentap.usage.source "injected"), and removes from the
	// response exactly what that added: the usage-only chunk and the
	// "usage":null member of the other chunks. The request body is read
	// whole first (up to max_request_body; larger bodies pass untouched)
	// and the partial event at the end of each write is held back until it
	// is complete. Requests that asked for usage themselves are not
	// changed. Default: off.
	InjectUsage bool `json:"inject_usage,omitempty"`
	// Tokenizer counts the output tokens of streams that will report no
	// usage (OpenAI-style streams without stream_options.include_usage,
	// when inject_usage is off), delta by delta as they pass:
	// "o200k_base" (current OpenAI models), "cl100k_base" (GPT-4 and
	// GPT-3.5), or "none" for tokentap's heuristic, which is free but a few
	// percent off (docs/telemetry.md). Such counts are labelled
	// tokentap.usage.source "estimated". Default: "o200k_base".
	Tokenizer string `json:"tokenizer,omitempty"`
	// VerifyUsage checks the provider's reported output token count on
	// this share of requests, chosen at random (0 < share <= 1): their
	// answer text is counted with the model's own tokenizer, where it is
	// known, and compared (docs/telemetry.md, "Checking reported usage").
	// Default: 0, off.
	VerifyUsage float64 `json:"verify_usage,omitempty"`
	// Labels adds dimensions of the user's own to every span, metric point
	// and stats row, by name: each value is a template with Caddy
	// placeholders, evaluated at the end of the request, for example
	// {"team": "{http.request.header.X-Team}"}. Names are lower-case
	// letters, digits and _; on spans and metrics they appear as
	// tokentap.label.<name>. Default: none.
	Labels map[string]string `json:"labels,omitempty"`
	// MaxLabelValues caps the distinct values each label takes in this
	// process; later values become "_other". Default: 100.
	MaxLabelValues int `json:"max_label_values,omitempty"`
	// CaptureContent records prompts and completions on each span, as the
	// GenAI semantic conventions' gen_ai.system_instructions,
	// gen_ai.input.messages and gen_ai.output.messages (JSON strings).
	// They hold what users and models wrote, so this is for development
	// and debugging. true or false decides; left out, the environment
	// variable OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT does
	// (SPAN_ONLY, SPAN_AND_EVENT or true turn it on). A request with the
	// header Tokentap-Capture-Content: off is never captured. Default: off.
	CaptureContent *bool `json:"capture_content,omitempty"`
	// MaxContentSize bounds each captured attribute, in bytes of JSON:
	// longer content is cut (and marked) so that the JSON stays valid.
	// At least 256. Default: 16 KiB.
	MaxContentSize int64 `json:"max_content_size,omitempty"`
	// ConversationID sets gen_ai.conversation.id on each span from a value
	// of the request: a template with Caddy placeholders, evaluated when
	// the span starts, for example "{http.request.header.X-Session-Id}".
	// Backends that group a conversation's calls (Honeycomb's agent views,
	// Langfuse's sessions) read it. tokentap never makes one up: a request
	// for which the template is empty gets none. Default: none.
	ConversationID string `json:"conversation_id,omitempty"`
	// Langfuse adds the attribute Langfuse reads a generation's completion
	// start from, langfuse.observation.completion_start_time (the moment
	// of the first output token, as a JSON string), so that its time to
	// first token column fills: it does not read
	// gen_ai.response.time_to_first_chunk. Default: off.
	Langfuse bool `json:"langfuse,omitempty"`
	// Prices price each exchange's tokens, per model, in US dollars per
	// million tokens; the first line whose model pattern matches wins,
	// before PricingFile. The cost goes on the span
	// (tokentap.cost.usd) and into the tokentap.cost counter. No prices
	// ship with tokentap. Default: none, and no cost.
	Prices []ModelPrice `json:"prices,omitempty"`
	// PricingFile is a pricing file in the format of LiteLLM's
	// model_prices_and_context_window.json (input_cost_per_token,
	// output_cost_per_token, cache_read_input_token_cost,
	// cache_creation_input_token_cost, output_cost_per_reasoning_token,
	// in dollars per token), read at provisioning: a file the user keeps
	// already. Default: none.
	PricingFile string `json:"pricing_file,omitempty"`
	// CostFromEstimates prices exchanges whose output count tokentap
	// estimated (no usage reported). Off by default: a cost is a bill,
	// and an estimate is not. An estimated exchange rarely has an input
	// count anyway, and without one there is no cost.
	CostFromEstimates bool `json:"cost_from_estimates,omitempty"`
	// SLOs are the service-level objectives, per model: the first whose
	// model pattern matches judges each exchange, met or missed, on the
	// span (tokentap.slo.met), in the tokentap.slo.* counters and in the
	// live stats' attainment and token goodput. Default: none.
	SLOs []ModelSLO `json:"slos,omitempty"`
	// SLOHeaders lets each request state its own objective in the headers
	// X-Slo-Ttft-Ms (the longest time to first token) and X-Slo-Tpot-Ms
	// (the longest time per output token after the first), in
	// milliseconds, as serving stacks that route on per-request targets
	// read them: such a request is judged against its own objective
	// instead of SLOs, with the same verdicts, counters and goodput, and
	// its span says tokentap.slo.source "request". "strip" removes the
	// headers before the upstream, "keep" passes them on for an upstream
	// that routes on them too. A header that is not a positive number of
	// milliseconds is left out, logged once and counted as a degraded
	// measurement (slo_header_invalid). Default: off, and the headers
	// pass on untouched.
	SLOHeaders string `json:"slo_headers,omitempty"`
	// Drift sets the thresholds of the slowdown detector of the live
	// stats rows this handler creates: each row's health (ok, slow,
	// insufficient_data) against its own earlier requests. Default: the
	// detector's defaults (docs/drift.md).
	Drift *DriftConfig `json:"drift,omitempty"`
	// Record writes a recording of the traffic: a JSON line per finished
	// exchange with its arrival, route, API, model, lengths and
	// measurements, and its prompt only when content capture is on, for
	// `tokentap load --replay`. Default: none.
	Record *RecordConfig `json:"record,omitempty"`

	logger *zap.Logger
	// cfg is what the provisioning steps resolve, one file each; mw
	// serves it.
	cfg exchange.Config
	// drift is the rows' detector configuration (drift.go).
	drift *drift.Config
	mw    *exchange.Middleware
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.tokentap",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision applies defaults and attaches the handler to the shared
// TracerProvider and MeterProvider.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if h.MaxRequestBody == 0 {
		h.MaxRequestBody = DefaultMaxRequestBody
	}
	if h.MaxResponseBody == 0 {
		h.MaxResponseBody = DefaultMaxResponseBody
	}
	if h.Dialect != "" {
		d, ok := meter.LookupDialect(h.Dialect)
		if !ok {
			return fmt.Errorf("unknown dialect %q (known: %s)", h.Dialect, strings.Join(meter.DialectNames(), ", "))
		}
		h.cfg.Dialect = &d
	}
	if err := h.provisionTokenizer(); err != nil {
		return err
	}
	if err := h.provisionLabels(); err != nil {
		return err
	}
	if err := h.provisionCapture(); err != nil {
		return err
	}
	if err := h.provisionDrift(); err != nil {
		return err
	}
	if err := h.provisionSLO(); err != nil {
		return err
	}
	if err := h.provisionCost(); err != nil {
		return err
	}
	if err := h.provisionTelemetry(ctx); err != nil {
		return err
	}
	if err := h.provisionRecord(); err != nil {
		return err
	}
	h.cfg.Provider = h.Provider
	h.cfg.MaxRequestBody, h.cfg.MaxResponseBody, h.cfg.MaxEventSize = h.MaxRequestBody, h.MaxResponseBody, h.MaxEventSize
	h.cfg.StallThreshold = time.Duration(h.StallThreshold)
	h.cfg.InjectUsage = h.InjectUsage
	h.cfg.ConversationID = h.ConversationID
	h.cfg.CostFromEstimates = h.CostFromEstimates
	h.cfg.Logger = h.logger
	h.cfg.Host = caddyHost
	h.mw = exchange.New(h.cfg)
	return nil
}

// Validate rejects configurations that cannot work.
func (h *Handler) Validate() error {
	if h.MaxRequestBody < 0 {
		return fmt.Errorf("max_request_body must be at least 0: %d", h.MaxRequestBody)
	}
	if h.MaxResponseBody < 0 {
		return fmt.Errorf("max_response_body must be at least 0: %d", h.MaxResponseBody)
	}
	if h.MaxEventSize < 0 {
		return fmt.Errorf("max_event_size must be at least 0: %d", h.MaxEventSize)
	}
	if h.MaxLabelValues < 0 {
		return fmt.Errorf("max_label_values must be at least 0: %d", h.MaxLabelValues)
	}
	if h.StallThreshold < 0 {
		return fmt.Errorf("stall_threshold must be at least 0: %v", time.Duration(h.StallThreshold))
	}
	return nil
}

// Cleanup releases the handler's hold on the shared TracerProvider and
// MeterProvider once its in-flight exchanges have ended (a reload does not
// wait for them), and the last handler to go flushes and shuts them down.
// Safe after a failed Provision.
func (h *Handler) Cleanup() error {
	switch {
	case h.mw != nil:
		h.mw.Close()
	case h.cfg.Release != nil:
		h.cfg.Release()
	}
	return nil
}

// ServeHTTP measures the exchange while next (reverse_proxy) carries it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return h.mw.Serve(w, r, next.ServeHTTP)
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
