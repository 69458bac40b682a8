package simulator

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Handler is a simulated LLM API. It answers POST requests in the wire
// format their path selects, streaming or not, with deterministic text on a
// deterministic schedule, and injects faults on demand:
//
//   - …/chat/completions: OpenAI Chat Completions
//   - …/v1/responses: OpenAI Responses
//   - …/v1/messages: Anthropic Messages
//   - …/models/{model}:streamGenerateContent (SSE with ?alt=sse, else a
//     streamed JSON array) and …/models/{model}:generateContent: Gemini
//   - …/api/chat and …/api/generate: Ollama's native NDJSON API
//
// Any other path is answered 404 in OpenAI's error shape. It is a terminal
// handler: it never calls the next one.
//
// Every timing and fault field can be overridden per request by a
// Tokentap-Sim-* header (see the Header constants), and the timing fields
// per model in models; both work alike in every format.
type Handler struct {
	// The timing of models without an entry in models. Its fields appear
	// inline in the JSON config: time_to_first_token (default 200ms),
	// tokens_per_second (default 50), jitter (default 0) and output_tokens
	// (default 64).
	Profile

	// When usage is reported. "auto" (the default) does as each provider
	// does: an OpenAI chat stream ends with a usage chunk only if the
	// request sets stream_options.include_usage (a completion body always
	// has usage), and the other formats always report it. "always" reports
	// it in every response. "never" suppresses it where the format allows:
	// no usage chunk or field (OpenAI chat), "usage":null (Responses), no
	// usageMetadata (Gemini), no prompt_eval_count and eval_count (Ollama);
	// Anthropic's format requires usage, so it is always reported there.
	Usage string `json:"usage,omitempty"`

	// The seed of the generator that picks the output words and the
	// jitter; the request body is hashed into it, so the same request to
	// the same config always gets the same bytes. Zero selects the
	// default, 1.
	Seed int64 `json:"seed,omitempty"`

	// Per-model timing, keyed by the request's model: each set field
	// overrides the top-level one. Default: none.
	Models map[string]Profile `json:"models,omitempty"`

	// windows holds each model's rate limit window (ratelimit.go); made
	// by Provision.
	windows *rateWindows

	// If not zero, every request is answered at once with this status (400
	// to 599) and an error body in the format's shape (Anthropic's error
	// type, Gemini's status name and Ollama's message follow from the
	// status). Default: 0, no failure.
	FailStatus int `json:"fail_status,omitempty"`

	// The body sent with fail_status: "json" (the default), the format's
	// error object, or "none", an empty body.
	FailStatusBody string `json:"fail_status_body,omitempty"`

	// If set, a response fails after this many content tokens: a stream
	// with the format's mid-stream error and no end marker (OpenAI chat: an
	// error data event, no [DONE]; Responses: an error event, then
	// response.failed; Anthropic: an overloaded_error event, no
	// message_stop; Gemini: a bare JSON error object, not SSE-framed, or an
	// error element closing the array; Ollama: an {"error":…} line), a
	// non-streaming response with status 500. Zero fails before the first
	// token. Default: unset, no failure.
	ErrorAfter *int `json:"error_after,omitempty"`

	// If set, a response stops after this many content tokens, cleanly at
	// the HTTP level but without what follows the last token in the format
	// (finish reason, final usage, terminator); a non-streaming body is cut
	// inside the message text. Default: unset.
	TruncateAfter *int `json:"truncate_after,omitempty"`

	// If set, the connection is cut after this many content tokens, as a
	// crashed upstream would. Default: unset.
	AbortAfter *int `json:"abort_after,omitempty"`

	// load counts the requests being served, per model, for
	// batch_slowdown; set at provisioning.
	load *load
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.tokentap_simulator",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision sets up h, filling in defaults.
func (h *Handler) Provision(_ caddy.Context) error {
	h.Profile = defaultProfile.Overlay(h.Profile)
	if h.Usage == "" {
		h.Usage = UsageAuto
	}
	h.Seed = h.seed()
	h.windows = new(rateWindows)
	if h.FailStatusBody == "" {
		h.FailStatusBody = StatusBodyJSON
	}
	h.load = new(load)
	return nil
}

func (h *Handler) seed() int64 {
	if h.Seed == 0 {
		return 1
	}
	return h.Seed
}

// Validate ensures that h's configuration is valid.
func (h *Handler) Validate() error {
	if err := h.Profile.validate(); err != nil {
		return err
	}
	for name, p := range h.Models {
		if name == "" {
			return errors.New("models: empty model name")
		}
		if err := p.validate(); err != nil {
			return fmt.Errorf("model %q: %w", name, err)
		}
	}
	if h.Usage != "" && !validUsage(h.Usage) {
		return fmt.Errorf(`usage must be "auto", "always" or "never", got %q`, h.Usage)
	}
	if h.FailStatus != 0 && (h.FailStatus < 400 || h.FailStatus > 599) {
		return fmt.Errorf("fail_status must be from 400 to 599, got %d", h.FailStatus)
	}
	switch h.FailStatusBody {
	case "", StatusBodyJSON, StatusBodyNone:
	default:
		return fmt.Errorf(`fail_status_body must be "json" or "none", got %q`, h.FailStatusBody)
	}
	for _, f := range []struct {
		name  string
		after *int
	}{{"error_after", h.ErrorAfter}, {"truncate_after", h.TruncateAfter}, {"abort_after", h.AbortAfter}} {
		if f.after != nil && *f.after < 0 {
			return fmt.Errorf("%s must not be negative, got %d", f.name, *f.after)
		}
	}
	return nil
}

// maxBodySize bounds the request body read into memory; real providers
// reject far smaller bodies than this.
const maxBodySize = 32 << 20

// ServeHTTP answers a request in the wire format its path selects; next is
// never called.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	// The schedule counts from here, the closest the handler gets to the
	// request's arrival.
	start := time.Now()

	f := formatFor(r.URL)
	if f == nil {
		writeAPIError(w, openAIChat{}, notFound(r.Method, r.URL.Path))
		return nil
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeAPIError(w, f, invalidRequest(http.StatusMethodNotAllowed, "", "method_not_allowed",
			"Invalid method %s for %s: use POST.", r.Method, r.URL.Path))
		return nil
	}
	o, err := parseOverrides(r.Header)
	if err != nil {
		writeError(w, f, err)
		return nil
	}
	// A failing provider answers before it looks at the body.
	if status, withBody := h.failStatus(o); status != 0 {
		if withBody {
			writeAPIError(w, f, statusError(status))
		} else {
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(status)
		}
		return nil
	}

	body, err := readBody(w, r)
	if err != nil {
		writeError(w, f, err)
		return nil
	}
	p, err := h.plan(f, r.URL, body, o, h.load)
	if h.load != nil && err == nil {
		defer h.load.exit(p.Model)
	}
	if err == nil {
		err = checkStamp(&p, o)
	}
	if err != nil {
		writeError(w, f, err)
		return nil
	}
	if !h.rateLimit(w, f, &p, start) {
		return nil
	}
	s := newScheduler(r, start)
	defer s.stop()
	if p.Stream {
		serveStream(w, s, &p, o.stamp)
	} else {
		serveBody(w, s, &p)
	}
	return nil
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodySize))
	if err == nil {
		return body, nil
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return nil, invalidRequest(http.StatusRequestEntityTooLarge, "", "request_too_large",
			"The request body exceeds %d bytes.", maxBodySize)
	}
	return nil, invalidRequest(http.StatusBadRequest, "", "", "Could not read the request body: %v.", err)
}

func writeError(w http.ResponseWriter, f format, err error) {
	e, ok := errors.AsType[*apiError](err)
	if !ok {
		e = statusError(http.StatusInternalServerError)
	}
	writeAPIError(w, f, e)
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
