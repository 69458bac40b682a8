package simulator

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/tidwall/gjson"
)

// Fixed response fields. created is a constant rather than the clock so that
// the same request always yields byte-identical responses, which is what lets
// tests and benchmarks compare a proxied stream with a direct one.
const (
	created           = 1767225600 // 2026-01-01T00:00:00Z
	systemFingerprint = "fp_tokentap_sim"
	defaultModel      = "tokentap-sim"
	idPrefix          = "chatcmpl-sim"
)

var (
	sseData      = []byte("data: ")
	sseEnd       = []byte("\n\n")
	sseDone      = []byte("data: [DONE]\n\n")
	midStreamErr = []byte(`data: {"error":{"message":"simulated mid-stream failure","type":"server_error","param":null,"code":null}}` + "\n\n")
)

// openAIChat is OpenAI's Chat Completions format, POST …/chat/completions:
// an SSE stream of chat.completion.chunk objects ending in data: [DONE], or
// one chat.completion object.
type openAIChat struct{}

func (openAIChat) name() string { return FormatOpenAIChat }

func (openAIChat) id(sum []byte) string { return idPrefix + hex.EncodeToString(sum) }

func (openAIChat) parse(_ *url.URL, body []byte) (request, error) {
	req, err := parseObject(body, func() *apiError {
		return invalidRequest(http.StatusBadRequest, "", "",
			"We could not parse the JSON body of your request. The OpenAI API expects a JSON payload.")
	})
	if err != nil {
		return request{}, err
	}
	messages := req.Get("messages")
	if !messages.IsArray() || len(messages.Array()) == 0 {
		return request{}, invalidRequest(http.StatusBadRequest, "messages", "missing_required_parameter",
			"Missing required parameter: 'messages'.")
	}
	r := request{
		model:        optionalString(req.Get("model")),
		stream:       req.Get("stream").Bool(),
		includeUsage: req.Get("stream_options.include_usage").Bool(),
	}
	for _, m := range messages.Array() {
		r.promptBytes += textBytes(m.Get("content"))
	}
	for _, param := range []string{"max_completion_tokens", "max_tokens"} {
		v := req.Get(param)
		if !v.Exists() || v.Type == gjson.Null {
			continue
		}
		limit, err := strconv.Atoi(v.Raw)
		if v.Type != gjson.Number || err != nil || limit < 1 {
			return request{}, invalidRequest(http.StatusBadRequest, param, "invalid_value",
				"Invalid '%s': expected an integer of at least 1, got %s.", param, v.Raw)
		}
		r.limit = limit
		break // max_completion_tokens supersedes the deprecated max_tokens
	}
	return r, nil
}

// usage does as OpenAI does in auto mode: a stream reports usage only when
// the request sets stream_options.include_usage, a completion body always.
func (openAIChat) usage(mode string, req request) bool {
	switch mode {
	case UsageAlways:
		return true
	case UsageNever:
		return false
	}
	return !req.stream || req.includeUsage
}

func (openAIChat) finishReason(capped bool) string {
	if capped {
		return "length"
	}
	return "stop"
}

func (openAIChat) stream(p *Plan) streamEncoder { return newChunkEncoder(p) }

func (openAIChat) body(p *Plan) ([]byte, string, int) {
	body, textStart := completionBody(p, len(p.Tokens), p.FinishReason)
	return body, "application/json", textStart
}

func (openAIChat) errorBody(e *apiError) ([]byte, string) { return openAIErrorBody(e) }

// openAIErrorBody is the error shape of both OpenAI formats. OpenAI does not
// escape HTML characters, as in "Expected a value >= 16".
func openAIErrorBody(e *apiError) ([]byte, string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct { // strings always marshal
		Error *apiError `json:"error"`
	}{e})
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), "application/json"
}

// chunkEncoder renders the events of one chat.completion.chunk stream. The
// envelope is the same for every chunk, so it is rendered once per request
// and only the choice varies.
type chunkEncoder struct {
	p    *Plan
	head []byte // `data: {"id":…,"choices":[`
	tail []byte // `]` + `,"usage":null` when usage will be sent + "}\n\n"
	buf  []byte
}

func newChunkEncoder(p *Plan) *chunkEncoder {
	head := append([]byte(nil), sseData...)
	head = append(head, `{"id":`...)
	head = appendJSONString(head, p.ID)
	head = append(head, `,"object":"chat.completion.chunk","created":`...)
	head = strconv.AppendInt(head, created, 10)
	head = append(head, `,"model":`...)
	head = appendJSONString(head, p.Model)
	head = append(head, `,"system_fingerprint":"`+systemFingerprint+`","choices":[`...)
	tail := []byte("]")
	if p.Usage {
		// OpenAI puts an explicit null usage on every chunk of a stream
		// whose last chunk carries it; clients key on its presence.
		tail = append(tail, `,"usage":null`...)
	}
	tail = append(tail, "}\n\n"...)
	return &chunkEncoder{p: p, head: head, tail: tail}
}

func (e *chunkEncoder) contentType() string { return "text/event-stream; charset=utf-8" }

// start sends the role-only chunk, as OpenAI and vLLM do before any token.
func (e *chunkEncoder) start(emit func([]byte) bool) bool { return emit(e.role()) }

func (e *chunkEncoder) token(i int) []byte { return e.content(e.p.Tokens[i]) }

// end sends the finish chunk, the usage chunk if any and [DONE]: the finish
// reason is not the end of an OpenAI stream.
func (e *chunkEncoder) end(emit func([]byte) bool) bool {
	return emit(e.finish(e.p.FinishReason)) &&
		(!e.p.Usage || emit(e.usage(newUsage(e.p.PromptTokens, len(e.p.Tokens))))) &&
		emit(sseDone)
}

func (e *chunkEncoder) fail(emit func([]byte) bool) bool { return emit(midStreamErr) }

func (e *chunkEncoder) choice(choice string) []byte {
	e.buf = append(e.buf[:0], e.head...)
	e.buf = append(e.buf, choice...)
	e.buf = append(e.buf, e.tail...)
	return e.buf
}

func (e *chunkEncoder) role() []byte {
	return e.choice(`{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`)
}

func (e *chunkEncoder) content(token string) []byte {
	e.buf = append(e.buf[:0], e.head...)
	e.buf = append(e.buf, `{"index":0,"delta":{"content":`...)
	e.buf = appendJSONString(e.buf, token)
	e.buf = append(e.buf, `},"logprobs":null,"finish_reason":null}`...)
	e.buf = append(e.buf, e.tail...)
	return e.buf
}

func (e *chunkEncoder) finish(reason string) []byte {
	return e.choice(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"` + reason + `"}`)
}

func (e *chunkEncoder) usage(u usage) []byte {
	e.buf = append(e.buf[:0], e.head...)
	e.buf = append(e.buf, `],"usage":`...)
	e.buf = u.appendJSON(e.buf)
	e.buf = append(e.buf, "}\n\n"...)
	return e.buf
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// usage is OpenAI's usage object, in its field order.
type usage struct {
	PromptTokens            int                     `json:"prompt_tokens"`
	CompletionTokens        int                     `json:"completion_tokens"`
	TotalTokens             int                     `json:"total_tokens"`
	PromptTokensDetails     promptTokensDetails     `json:"prompt_tokens_details"`
	CompletionTokensDetails completionTokensDetails `json:"completion_tokens_details"`
}

type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type completionTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

func newUsage(prompt, completion int) usage {
	return usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
}

func (u usage) appendJSON(b []byte) []byte {
	q, _ := json.Marshal(u) // plain ints always marshal
	return append(b, q...)
}

// completion is a non-streaming chat.completion object, in OpenAI's field
// order.
type completion struct {
	ID                string   `json:"id"`
	Object            string   `json:"object"`
	Created           int64    `json:"created"`
	Model             string   `json:"model"`
	Choices           []choice `json:"choices"`
	Usage             *usage   `json:"usage,omitempty"`
	SystemFingerprint string   `json:"system_fingerprint"`
}

type choice struct {
	Index        int       `json:"index"`
	Message      message   `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
}

type message struct {
	Role    string  `json:"role"`
	Content string  `json:"content"`
	Refusal *string `json:"refusal"`
}

// contentMarker precedes the message text in a rendered completion; nothing
// before it can contain it, because string values there are JSON-escaped.
var contentMarker = []byte(`"message":{"role":"assistant","content":"`)

// completionBody renders the chat.completion for the first n planned tokens
// and returns it with the byte offset at which the message text starts.
func completionBody(p *Plan, n int, finishReason string) ([]byte, int) {
	c := completion{
		ID:      p.ID,
		Object:  "chat.completion",
		Created: created,
		Model:   p.Model,
		Choices: []choice{{
			Message:      message{Role: "assistant", Content: p.text(n)},
			FinishReason: finishReason,
		}},
		SystemFingerprint: systemFingerprint,
	}
	if p.Usage {
		u := newUsage(p.PromptTokens, n)
		c.Usage = &u
	}
	body, _ := json.Marshal(c) // strings and ints always marshal
	return body, bytes.Index(body, contentMarker) + len(contentMarker)
}
