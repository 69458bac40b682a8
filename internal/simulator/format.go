package simulator

import (
	"math"
	"net/http"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"
)

// Format names, as in Plan.Format: the names of tokentap's meter dialects
// for the same formats, except that Ollama's one dialect covers both of its
// endpoints.
const (
	FormatOpenAIChat      = "openai_chat"
	FormatOpenAIResponses = "openai_responses"
	FormatAnthropic       = "anthropic_messages"
	FormatGemini          = "gemini"
	FormatOllamaChat      = "ollama_chat"
	FormatOllamaGenerate  = "ollama_generate"
)

// request is what a format reads from a request: the plan's inputs.
type request struct {
	model  string // "" selects defaultModel
	stream bool

	// includeUsage is OpenAI chat's stream_options.include_usage.
	includeUsage bool

	// limit is the request's cap on output tokens; 0 means none.
	limit int

	// promptBytes is the size of the prompt's text, which the reported
	// input tokens are estimated from.
	promptBytes int
}

// format is one provider's wire format: how a request is read and how every
// part of the answer is written. The scheduler, the plan, the faults, the
// trailers and the Tokentap-Sim-* headers are shared, so that every format
// gets them alike and only the bytes differ.
type format interface {
	// name is the format's Plan.Format.
	name() string

	// parse reads the plan's inputs from the request; an error is an
	// *apiError, answered with its status in the format's error shape.
	parse(u *url.URL, body []byte) (request, error)

	// usage reports whether the answer to req reports usage in mode
	// (UsageAuto, UsageAlways or UsageNever).
	usage(mode string, req request) bool

	// id is the response id for the hash of the request body.
	id(sum []byte) string

	// finishReason is the format's own word for an output that ran to its
	// planned end (capped false) or was cut by the request's limit.
	finishReason(capped bool) string

	// stream returns the encoder of p's streamed answer.
	stream(p *Plan) streamEncoder

	// body renders the non-streamed answer to p, its Content-Type, and the
	// offset of the output text in it, where a truncated body is cut.
	body(p *Plan) (body []byte, contentType string, textStart int)

	// errorBody renders e in the format's error shape, with its
	// Content-Type.
	errorBody(e *apiError) (body []byte, contentType string)
}

// streamEncoder renders one streamed answer. Every method writes whole
// events (or lines, or array elements) through emit, which pushes each to
// the client at once and reports whether the client is still there.
type streamEncoder interface {
	// contentType is the stream's Content-Type.
	contentType() string

	// start sends what precedes the first token, at once on arrival.
	start(emit func([]byte) bool) bool

	// token returns the event that carries planned token i; the slice is
	// valid until the next call.
	token(i int) []byte

	// end sends what follows the last token when the stream completes:
	// finish reason, usage and terminator, as the format has them.
	end(emit func([]byte) bool) bool

	// fail sends the format's mid-stream error, after p.Sent() tokens.
	fail(emit func([]byte) bool) bool
}

// formatFor picks the format of a request by its path, as the providers'
// routes do; nil means no simulated API lives there.
func formatFor(u *url.URL) format {
	path := u.Path
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return openAIChat{}
	case strings.HasSuffix(path, "/v1/responses"):
		return openAIResponses{}
	case strings.HasSuffix(path, "/v1/messages"):
		return anthropicMessages{}
	case strings.HasSuffix(path, "/api/chat"):
		return ollama{chat: true}
	case strings.HasSuffix(path, "/api/generate"):
		return ollama{}
	}
	if model, method, ok := geminiTarget(path); ok {
		switch method {
		case "streamGenerateContent":
			return gemini{model: model, streamed: true, sse: u.Query().Get("alt") == "sse"}
		case "generateContent":
			return gemini{model: model}
		}
	}
	return nil
}

// parseObject checks that body is one JSON object, the only request body
// any of the simulated APIs accepts, and returns it.
func parseObject(body []byte, invalid func() *apiError) (gjson.Result, error) {
	if !gjson.ValidBytes(body) {
		return gjson.Result{}, invalid()
	}
	req := gjson.ParseBytes(body)
	if !req.IsObject() {
		return gjson.Result{}, invalid()
	}
	return req, nil
}

// textBytes is the size of the text in a content value that is either a
// string or an array of parts with a "text" field, the shape every provider
// uses for message content.
func textBytes(c gjson.Result) int {
	if c.Type == gjson.String {
		return len(c.Str)
	}
	size := 0
	for _, part := range c.Array() {
		size += len(part.Get("text").Str)
	}
	return size
}

// optionalString is the string value of v, or "" when it is absent or not a
// string.
func optionalString(v gjson.Result) string {
	if v.Type == gjson.String {
		return v.Str
	}
	return ""
}

// intParam reads an optional integer parameter that must be at least lo:
// ok is false for a present value of another type or below lo, and n is 0
// when the parameter is absent or null. A value above MaxOutputTokens reads
// as MaxOutputTokens, which no plan exceeds.
func intParam(v gjson.Result, lo int) (n int, ok bool) {
	if !v.Exists() || v.Type == gjson.Null {
		return 0, true
	}
	if v.Type != gjson.Number || math.Trunc(v.Num) != v.Num || v.Num < float64(lo) {
		return 0, false
	}
	return int(min(v.Num, MaxOutputTokens)), true
}

// alwaysUsage is the usage rule of the providers that report usage in every
// answer: only the never mode suppresses it.
func alwaysUsage(mode string) bool { return mode != UsageNever }

// writeAPIError answers with e in f's error shape.
func writeAPIError(w http.ResponseWriter, f format, e *apiError) {
	body, contentType := f.errorBody(e)
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", itoa(len(body)))
	w.WriteHeader(e.status)
	_, _ = w.Write(body) // a client that left cannot be told anything
}
