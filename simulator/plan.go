package simulator

import (
	"encoding/hex"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"
)

// Request headers that override the handler's config for one request, so
// tests and benchmarks can drive the simulator through a proxy. The three
// whose names are also in Trailers double as response trailers carrying the
// schedule that was actually served.
const (
	HeaderStatus           = "Tokentap-Sim-Status"
	HeaderStatusBody       = "Tokentap-Sim-Status-Body"
	HeaderErrorAfter       = "Tokentap-Sim-Error-After"
	HeaderTruncateAfter    = "Tokentap-Sim-Truncate-After"
	HeaderAbortAfter       = "Tokentap-Sim-Abort-After"
	HeaderTimeToFirstToken = "Tokentap-Sim-Time-To-First-Token"
	HeaderTokensPerSecond  = "Tokentap-Sim-Tokens-Per-Second"
	HeaderOutputTokens     = "Tokentap-Sim-Output-Tokens"
	HeaderJitter           = "Tokentap-Sim-Jitter"
	HeaderUsage            = "Tokentap-Sim-Usage"

	// HeaderLastToken is only a response trailer.
	HeaderLastToken = "Tokentap-Sim-Last-Token"
)

// Trailers is the value of the Trailer response header: the names of the
// trailers that carry the served schedule, in seconds from the request's
// arrival (time to first token, last token) and as a count (output tokens).
const Trailers = HeaderTimeToFirstToken + ", " + HeaderLastToken + ", " + HeaderOutputTokens

// Usage modes.
const (
	UsageAuto   = "auto"
	UsageAlways = "always"
	UsageNever  = "never"
)

// Status body modes.
const (
	StatusBodyJSON = "json"
	StatusBodyNone = "none"
)

// FaultKind is how a stream fails, if it does.
type FaultKind int

// Faults, in the order in which they win when two are set to fire at the
// same token.
const (
	FaultNone     FaultKind = iota
	FaultAbort              // the connection is cut (panic(http.ErrAbortHandler))
	FaultError              // a mid-stream error event ends the stream
	FaultTruncate           // the stream just stops, without finish, usage or [DONE]
)

func (k FaultKind) String() string {
	switch k {
	case FaultAbort:
		return "abort"
	case FaultError:
		return "error"
	case FaultTruncate:
		return "truncate"
	}
	return "none"
}

// Plan is everything the simulator will do with one request, computed
// before any byte is sent: it is the ground truth that measurements of the
// response are compared with.
type Plan struct {
	// ID is the response's id: "chatcmpl-sim" and the hex FNV-64a hash of
	// the request body.
	ID string

	// Model is the response's model: the request's, or "tokentap-sim".
	Model string

	// Stream is whether the response is an SSE stream of chunks.
	Stream bool

	// Usage is whether usage is reported: as the last chunk of a stream
	// (with "usage":null on every other chunk), or in the completion body.
	Usage bool

	// PromptTokens is the estimate reported as usage.prompt_tokens.
	PromptTokens int

	// Profile is the resolved timing: the handler's, then the model's
	// override, then the request headers'.
	Profile Profile

	// Tokens are the planned output tokens, one per content chunk.
	Tokens []string

	// Offsets are the tokens' scheduled times from the request's arrival.
	Offsets []time.Duration

	// FinishReason is "length" when max_tokens cut the output short of the
	// profile's output_tokens, else "stop".
	FinishReason string

	// Status, when not zero, is the error status the request is answered
	// with at once, instead of any generation; StatusBody says whether the
	// answer has an OpenAI-style JSON body.
	Status     int
	StatusBody bool

	// Fault is how the response fails, and FaultAfter the number of
	// content tokens sent before it does (at most len(Tokens)). The fault
	// fires at the time the next token was due, or right after the last one.
	Fault      FaultKind
	FaultAfter int
}

// Sent is the number of content tokens that the response delivers.
func (p *Plan) Sent() int {
	if p.Fault != FaultNone {
		return p.FaultAfter
	}
	return len(p.Tokens)
}

// TimeToFirstToken is the scheduled offset of the first content token, or
// zero if none is sent.
func (p *Plan) TimeToFirstToken() time.Duration {
	if p.Sent() == 0 {
		return 0
	}
	return p.Offsets[0]
}

// LastToken is the scheduled offset of the last content token sent, or
// zero if none is.
func (p *Plan) LastToken() time.Duration {
	if n := p.Sent(); n > 0 {
		return p.Offsets[n-1]
	}
	return 0
}

// DecodeRate is the output rate, in tokens per second, that a client
// observes after the first token: (sent-1) / (last - first). It is zero
// when fewer than two tokens are sent.
func (p *Plan) DecodeRate() float64 {
	n := p.Sent()
	if n < 2 {
		return 0
	}
	return float64(n-1) / (p.LastToken() - p.TimeToFirstToken()).Seconds()
}

// Text is the full planned output.
func (p *Plan) Text() string { return p.text(len(p.Tokens)) }

func (p *Plan) text(n int) string {
	var b strings.Builder
	for _, t := range p.Tokens[:n] {
		b.WriteString(t)
	}
	return b.String()
}

// faultAt is when the fault fires, as an offset from the request's arrival.
func (p *Plan) faultAt() time.Duration {
	if p.FaultAfter < len(p.Offsets) {
		return p.Offsets[p.FaultAfter]
	}
	return p.LastToken()
}

// overrides are the per-request header values; nil fields are absent.
type overrides struct {
	status        *int
	statusBody    string
	errorAfter    *int
	truncateAfter *int
	abortAfter    *int
	profile       Profile
	jitterSet     bool // a header jitter of 0 must still override
	ttftSet       bool // as must a header time to first token of 0
	usage         string
}

func badHeader(name, value, why string) *apiError {
	return invalidRequest(http.StatusBadRequest, "", "invalid_header",
		"Invalid %s header %q: %s.", name, value, why)
}

func parseOverrides(h http.Header) (overrides, error) {
	var o overrides
	intHeader := func(name string, lo, hi int) (*int, error) {
		v := h.Get(name)
		if v == "" {
			return nil, nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < lo || n > hi {
			return nil, badHeader(name, v, "want an integer from "+strconv.Itoa(lo)+" to "+strconv.Itoa(hi))
		}
		return &n, nil
	}
	var err error
	if o.status, err = intHeader(HeaderStatus, 400, 599); err != nil {
		return o, err
	}
	if o.errorAfter, err = intHeader(HeaderErrorAfter, 0, MaxOutputTokens); err != nil {
		return o, err
	}
	if o.truncateAfter, err = intHeader(HeaderTruncateAfter, 0, MaxOutputTokens); err != nil {
		return o, err
	}
	if o.abortAfter, err = intHeader(HeaderAbortAfter, 0, MaxOutputTokens); err != nil {
		return o, err
	}
	n, err := intHeader(HeaderOutputTokens, 1, MaxOutputTokens)
	if err != nil {
		return o, err
	}
	if n != nil {
		o.profile.OutputTokens = *n
	}
	if v := h.Get(HeaderStatusBody); v != "" {
		o.statusBody = strings.ToLower(strings.TrimSpace(v))
		if o.statusBody != StatusBodyJSON && o.statusBody != StatusBodyNone {
			return o, badHeader(HeaderStatusBody, v, `want "json" or "none"`)
		}
	}
	if v := h.Get(HeaderUsage); v != "" {
		o.usage = strings.ToLower(strings.TrimSpace(v))
		if !validUsage(o.usage) {
			return o, badHeader(HeaderUsage, v, `want "auto", "always" or "never"`)
		}
	}
	if v := h.Get(HeaderTimeToFirstToken); v != "" {
		d, err := caddy.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < 0 {
			return o, badHeader(HeaderTimeToFirstToken, v, "want a non-negative duration such as 150ms")
		}
		o.profile.TimeToFirstToken, o.ttftSet = caddy.Duration(d), true
	}
	if v := h.Get(HeaderTokensPerSecond); v != "" {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || checkRate(f, false) != nil {
			return o, badHeader(HeaderTokensPerSecond, v, "want a positive number")
		}
		o.profile.TokensPerSecond = f
	}
	if v := h.Get(HeaderJitter); v != "" {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || checkJitter(f) != nil {
			return o, badHeader(HeaderJitter, v, "want a number in [0, 1)")
		}
		o.profile.Jitter, o.jitterSet = f, true
	}
	return o, nil
}

func validUsage(s string) bool { return s == UsageAuto || s == UsageAlways || s == UsageNever }

// Plan computes what the handler does with a request whose body is body and
// whose headers are header (nil for none): the same computation ServeHTTP
// makes, without HTTP or waiting, so that tests anywhere can get the ground
// truth of a request. The handler need not be provisioned. The error, for a
// malformed body or header, is the one ServeHTTP answers with status 400.
func (h *Handler) Plan(body []byte, header http.Header) (Plan, error) {
	o, err := parseOverrides(header)
	if err != nil {
		return Plan{}, err
	}
	p, err := h.plan(body, o)
	if err != nil {
		return Plan{}, err
	}
	p.Status, p.StatusBody = h.failStatus(o)
	return p, nil
}

// failStatus is the immediate error status to answer with, if any, and
// whether it has a body.
func (h *Handler) failStatus(o overrides) (int, bool) {
	status := h.FailStatus
	if o.status != nil {
		status = *o.status
	}
	mode := h.FailStatusBody
	if o.statusBody != "" {
		mode = o.statusBody
	}
	return status, mode != StatusBodyNone
}

// Constants mixed into the PCG seeds of the word and the jitter generators:
// separate streams let jitter change the timing without changing the text.
const (
	wordStream   = 0x746f6b656e746170 // "tokentap"
	jitterStream = 0x6a69747465727221 // "jitter!!"
)

func (h *Handler) plan(body []byte, o overrides) (Plan, error) {
	if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
		return Plan{}, invalidRequest(http.StatusBadRequest, "", "",
			"We could not parse the JSON body of your request. The OpenAI API expects a JSON payload.")
	}
	req := gjson.ParseBytes(body)
	messages := req.Get("messages")
	if !messages.IsArray() || len(messages.Array()) == 0 {
		return Plan{}, invalidRequest(http.StatusBadRequest, "messages", "missing_required_parameter",
			"Missing required parameter: 'messages'.")
	}

	hash := fnv.New64a()
	_, _ = hash.Write(body) // a hash never fails to write
	sum := hash.Sum64()

	p := Plan{
		ID:           idPrefix + hex.EncodeToString(hash.Sum(nil)),
		Model:        defaultModel,
		Stream:       req.Get("stream").Bool(),
		PromptTokens: promptTokens(messages),
		FinishReason: "stop",
	}
	if m := req.Get("model"); m.Type == gjson.String && m.Str != "" {
		p.Model = m.Str
	}

	usage := h.Usage
	if o.usage != "" {
		usage = o.usage
	}
	switch usage {
	case UsageAlways:
		p.Usage = true
	case UsageNever:
		p.Usage = false
	default:
		// OpenAI streams usage only on request, but always puts it in a
		// completion body.
		p.Usage = !p.Stream || req.Get("stream_options.include_usage").Bool()
	}

	prof := defaultProfile.Overlay(h.Profile).Overlay(h.Models[p.Model]).Overlay(o.profile)
	if o.ttftSet {
		prof.TimeToFirstToken = o.profile.TimeToFirstToken
	}
	if o.jitterSet {
		prof.Jitter = o.profile.Jitter
	}
	p.Profile = prof

	n := prof.OutputTokens
	for _, param := range []string{"max_completion_tokens", "max_tokens"} {
		v := req.Get(param)
		if !v.Exists() || v.Type == gjson.Null {
			continue
		}
		limit, err := strconv.Atoi(v.Raw)
		if v.Type != gjson.Number || err != nil || limit < 1 {
			return Plan{}, invalidRequest(http.StatusBadRequest, param, "invalid_value",
				"Invalid '%s': expected an integer of at least 1, got %s.", param, v.Raw)
		}
		if limit < n {
			n, p.FinishReason = limit, "length"
		}
		break // max_completion_tokens supersedes the deprecated max_tokens
	}

	seed := uint64(h.seed())
	wordRand := rand.New(rand.NewPCG(seed, sum^wordStream))
	p.Tokens = make([]string, n)
	for i := range p.Tokens {
		p.Tokens[i] = words[wordRand.IntN(len(words))]
	}
	p.Offsets = prof.Offsets(n, rand.New(rand.NewPCG(seed, sum^jitterStream)))

	p.Fault, p.FaultAfter = FaultNone, n
	for _, f := range []struct {
		kind   FaultKind
		config *int
		header *int
	}{
		{FaultAbort, h.AbortAfter, o.abortAfter},
		{FaultError, h.ErrorAfter, o.errorAfter},
		{FaultTruncate, h.TruncateAfter, o.truncateAfter},
	} {
		after := f.config
		if f.header != nil {
			after = f.header
		}
		if after == nil {
			continue
		}
		at := min(*after, n)
		if p.Fault == FaultNone || at < p.FaultAfter {
			p.Fault, p.FaultAfter = f.kind, at
		}
	}
	return p, nil
}

// promptTokens estimates the prompt's token count at four bytes of message
// text a token, the usual rule of thumb for English, so that usage looks
// like a real provider's without a tokenizer.
func promptTokens(messages gjson.Result) int {
	size := 0
	for _, m := range messages.Array() {
		c := m.Get("content")
		if c.Type == gjson.String {
			size += len(c.Str)
			continue
		}
		for _, part := range c.Array() {
			size += len(part.Get("text").Str)
		}
	}
	return max(size/4, 1)
}
