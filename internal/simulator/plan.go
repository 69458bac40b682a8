package simulator

import (
	"bytes"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"net/url"
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
	FaultError              // the format's mid-stream error ends the stream
	FaultTruncate           // the stream just stops, without finish, usage or terminator
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
	// Format is the wire format the request is answered in, one of the
	// Format* constants, chosen by the request's path.
	Format string

	// ID is the response's id: a format's own prefix ("chatcmpl-sim",
	// "resp_sim", "msg_sim" or, for Gemini's responseId, "sim") and the hex
	// FNV-64a hash of the request body. Ollama's answers carry no id, but
	// the plan still has one.
	ID string

	// Model is the response's model: the request's (for Gemini, the one in
	// the path), or "tokentap-sim".
	Model string

	// Stream is whether the response is streamed: as SSE events, Gemini's
	// streamed JSON array or Ollama's NDJSON lines.
	Stream bool

	// Usage is whether usage is reported: in the events of a stream that
	// carry it in the format, or in the non-streamed body.
	Usage bool

	// PromptTokens is the estimate reported as the input tokens (OpenAI's
	// prompt_tokens or input_tokens, Anthropic's input_tokens, Gemini's
	// promptTokenCount, Ollama's prompt_eval_count).
	PromptTokens int

	// Profile is the resolved timing: the handler's, then the model's
	// override, then the request headers'.
	Profile Profile

	// Tokens are the planned output tokens, one per content event.
	Tokens []string

	// Offsets are the tokens' scheduled times from the request's arrival.
	Offsets []time.Duration

	// MaxTokens is the request's cap on output tokens (max_tokens and
	// friends), or 0 when it has none.
	MaxTokens int

	// Capped is whether MaxTokens cut the output short of the profile's
	// output_tokens.
	Capped bool

	// FinishReason is why the output ends, in the format's own words:
	// finish_reason "stop" or "length" (OpenAI chat), the response status
	// "completed" or incomplete reason "max_output_tokens" (OpenAI
	// Responses), stop_reason "end_turn" or "max_tokens" (Anthropic),
	// finishReason "STOP" or "MAX_TOKENS" (Gemini), done_reason "stop" or
	// "length" (Ollama).
	FinishReason string

	// Status, when not zero, is the error status the request is answered
	// with at once, instead of any generation; StatusBody says whether the
	// answer has a body, in the format's error shape.
	Status     int
	StatusBody bool

	// Fault is how the response fails, and FaultAfter the number of
	// content tokens sent before it does (at most len(Tokens)). The fault
	// fires at the time the next token was due, or right after the last one.
	Fault      FaultKind
	FaultAfter int

	f format
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
	stamp         bool // HeaderStamp: prefix every SSE write with its send time
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
	if v := h.Get(HeaderStamp); v != "" {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return o, badHeader(HeaderStamp, v, `want "true" or "false"`)
		}
		o.stamp = b
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

// Plan computes what the handler does with an OpenAI chat completion
// request whose body is body and whose headers are header (nil for none):
// the same computation ServeHTTP makes, without HTTP or waiting, so that
// tests anywhere can get the ground truth of a request. The handler need not
// be provisioned. The error, for a malformed body or header, is the one
// ServeHTTP answers with status 400.
func (h *Handler) Plan(body []byte, header http.Header) (Plan, error) {
	return h.PlanTarget("/v1/chat/completions", body, header)
}

// PlanTarget is Plan for a request to target, a path with an optional query
// such as "/v1/messages" or
// "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", which
// selects the wire format as ServeHTTP does. A target that no format serves
// is an error, the one ServeHTTP answers with status 404.
func (h *Handler) PlanTarget(target string, body []byte, header http.Header) (Plan, error) {
	u, err := url.Parse(target)
	if err != nil {
		return Plan{}, notFound("POST", target)
	}
	f := formatFor(u)
	if f == nil {
		return Plan{}, notFound("POST", u.Path)
	}
	o, err := parseOverrides(header)
	if err != nil {
		return Plan{}, err
	}
	p, err := h.plan(f, u, body, o, nil)
	if err != nil {
		return Plan{}, err
	}
	if err := checkStamp(&p, o); err != nil {
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

// plan computes the plan of a request; l, when not nil, counts it in
// flight to its model from here on (the caller calls l.exit), and the
// model's requests in flight then set its speed. Without l the request is
// alone.
func (h *Handler) plan(f format, u *url.URL, body []byte, o overrides, l *load) (Plan, error) {
	req, err := f.parse(u, body)
	if err != nil {
		return Plan{}, err
	}

	hash := fnv.New64a()
	_, _ = hash.Write(contentOf(body)) // a hash never fails to write
	sum := hash.Sum64()

	p := Plan{
		Format: f.name(),
		ID:     f.id(hash.Sum(nil)),
		Model:  defaultModel,
		Stream: req.stream,
		// Four bytes of text a token is the usual rule of thumb for
		// English: usage looks like a real provider's without a tokenizer.
		PromptTokens: max(req.promptBytes/4, 1),
		MaxTokens:    req.limit,
		f:            f,
	}
	if req.model != "" {
		p.Model = req.model
	}

	usage := h.Usage
	if o.usage != "" {
		usage = o.usage
	}
	if usage == "" {
		usage = UsageAuto
	}
	p.Usage = f.usage(usage, req)

	prof := defaultProfile.Overlay(h.Profile).Overlay(h.Models[p.Model]).Overlay(o.profile)
	if o.ttftSet {
		prof.TimeToFirstToken = o.profile.TimeToFirstToken
	}
	if o.jitterSet {
		prof.Jitter = o.profile.Jitter
	}
	inflight := 1
	if l != nil {
		inflight = l.enter(p.Model)
	}
	prof = prof.underLoad(inflight, p.PromptTokens)
	p.Profile = prof

	n := prof.OutputTokens
	if req.limit > 0 && req.limit < n {
		n, p.Capped = req.limit, true
	}
	p.FinishReason = f.finishReason(p.Capped)

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

// contentOf is the part of a request body that decides the answer: the
// body without stream_options. A real model answers the same conversation
// the same way whether or not the client asked for usage, and tokentap's
// inject_usage relies on exactly that: its request differs from the
// client's only there, and the client must get the bytes it would have got.
func contentOf(body []byte) []byte {
	opts := gjson.GetBytes(body, "stream_options")
	if !opts.Exists() || opts.Index <= 0 {
		return body
	}
	start, end := opts.Index, opts.Index+len(opts.Raw)
	// Take the key, its colon and one separating comma with the value.
	for start > 0 && body[start-1] != '"' {
		start--
	}
	if start > 0 {
		start = bytes.LastIndexByte(body[:start-1], '"')
	}
	if start < 0 {
		return body
	}
	rest := bytes.TrimLeft(body[end:], " \t\r\n")
	if len(rest) > 0 && rest[0] == ',' {
		end = len(body) - len(rest) + 1
	} else if i := bytes.LastIndexByte(body[:start], ','); i >= 0 && len(bytes.TrimSpace(body[i+1:start])) == 0 {
		start = i
	}
	out := make([]byte, 0, len(body)-(end-start))
	out = append(out, body[:start]...)
	return append(out, body[end:]...)
}
