package simulator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
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

// chunkEncoder renders the events of one chat.completion.chunk stream. The
// envelope is the same for every chunk, so it is rendered once per request
// and only the choice varies.
type chunkEncoder struct {
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
	return &chunkEncoder{head: head, tail: tail}
}

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

// apiError is an OpenAI-style error: both the error a request is answered
// with and the Go error that carries it to the code that writes it.
type apiError struct {
	status  int
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.status, e.Type, e.Message) }

func strPtr(s string) *string { return &s }

func invalidRequest(status int, param, code, format string, args ...any) *apiError {
	e := &apiError{status: status, Message: fmt.Sprintf(format, args...), Type: "invalid_request_error"}
	if param != "" {
		e.Param = strPtr(param)
	}
	if code != "" {
		e.Code = strPtr(code)
	}
	return e
}

// statusError is the body a real provider sends with status: the type and
// code its SDKs key on for retries and error classes.
func statusError(status int) *apiError {
	text := http.StatusText(status)
	if text == "" {
		text = "status " + strconv.Itoa(status)
	}
	e := &apiError{status: status, Message: "simulated " + text, Type: "invalid_request_error"}
	switch {
	case status == http.StatusTooManyRequests:
		e.Message = "Rate limit reached (simulated). Please try again later."
		e.Type, e.Code = "requests", strPtr("rate_limit_exceeded")
	case status == http.StatusUnauthorized:
		e.Code = strPtr("invalid_api_key")
	case status == http.StatusNotFound:
		e.Code = strPtr("not_found")
	case status >= 500:
		e.Message = "The server had an error while processing your request (simulated " + text + ")."
		e.Type = "server_error"
	}
	return e
}

func (e *apiError) write(w http.ResponseWriter) {
	body, _ := json.Marshal(struct {
		Error *apiError `json:"error"`
	}{e})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.status)
	_, _ = w.Write(body) // a client that left cannot be told anything
}
