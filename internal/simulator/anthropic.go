package simulator

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// anthropicMessages is Anthropic's Messages format, POST …/v1/messages: an
// SSE stream of event:+data: pairs from message_start to message_stop, or
// one message object.
type anthropicMessages struct{}

func (anthropicMessages) name() string { return FormatAnthropic }

func (anthropicMessages) id(sum []byte) string { return "msg_sim" + hex.EncodeToString(sum) }

func (anthropicMessages) parse(_ *url.URL, body []byte) (request, error) {
	req, err := parseObject(body, func() *apiError {
		return invalidRequest(http.StatusBadRequest, "", "", "There was an issue with your request body: it is not a JSON object.")
	})
	if err != nil {
		return request{}, err
	}
	messages := req.Get("messages")
	if !messages.IsArray() || len(messages.Array()) == 0 {
		return request{}, invalidRequest(http.StatusBadRequest, "messages", "", "messages: Field required")
	}
	// The real API also requires model and max_tokens; the simulator
	// defaults them, as it does for the other formats.
	limit, ok := intParam(req.Get("max_tokens"), 1)
	if !ok {
		return request{}, invalidRequest(http.StatusBadRequest, "max_tokens", "",
			"max_tokens: Input should be a valid integer greater than or equal to 1, got %s", req.Get("max_tokens").Raw)
	}
	r := request{
		model:       optionalString(req.Get("model")),
		stream:      req.Get("stream").Bool(),
		limit:       limit,
		promptBytes: textBytes(req.Get("system")),
	}
	for _, m := range messages.Array() {
		r.promptBytes += textBytes(m.Get("content"))
	}
	return r, nil
}

// usage is always reported: message_start and message_delta must carry a
// usage object, so even the never mode cannot take it away.
func (anthropicMessages) usage(string, request) bool { return true }

func (anthropicMessages) finishReason(capped bool) string {
	if capped {
		return "max_tokens"
	}
	return "end_turn"
}

func (anthropicMessages) stream(p *Plan) streamEncoder { return &anthropicStream{p: p} }

// anthropicUsage is the usage object, in Anthropic's field order. Input
// tokens exclude the cache fields, which the simulator never fills.
type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// anthropicMessage is a message object, in Anthropic's field order.
type anthropicMessage struct {
	ID           string             `json:"id"`
	Type         string             `json:"type"`
	Role         string             `json:"role"`
	Model        string             `json:"model"`
	Content      []anthropicContent `json:"content"`
	StopReason   *string            `json:"stop_reason"`
	StopSequence *string            `json:"stop_sequence"`
	Usage        anthropicUsage     `json:"usage"`
}

type anthropicContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// anthropicTextMarker precedes the text in a rendered message; nothing
// before it can contain it, because string values there are JSON-escaped.
const anthropicTextMarker = `"content":[{"type":"text","text":"`

func (anthropicMessages) body(p *Plan) ([]byte, string, int) {
	body, _ := json.Marshal(anthropicMessage{ // strings and ints always marshal
		ID:         p.ID,
		Type:       "message",
		Role:       "assistant",
		Model:      p.Model,
		Content:    []anthropicContent{{Type: "text", Text: p.Text()}},
		StopReason: &p.FinishReason,
		Usage:      anthropicUsage{InputTokens: p.PromptTokens, OutputTokens: len(p.Tokens)},
	})
	return body, "application/json", strings.Index(string(body), anthropicTextMarker) + len(anthropicTextMarker)
}

// anthropicErrorType is the error type Anthropic sends with status, the
// field its SDKs and tokentap's error.type key on.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

func (anthropicMessages) errorBody(e *apiError) ([]byte, string) {
	body, _ := json.Marshal(struct { // strings always marshal
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}{Type: "error", Error: struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}{anthropicErrorType(e.status), e.Message}})
	return body, "application/json"
}

// Anthropic pads the JSON of most events with trailing spaces inside the
// data line (a trap for a parser that expects "}" at the end). The padding
// looks random in recordings; the simulator takes it from this fixed cycle,
// so that it is deterministic but not uniform.
var anthropicPads = [...]int{2, 14, 5, 11, 0, 8, 3, 13, 1, 9, 6}

// The events whose bytes never vary. The ping is rendered by another
// serializer than the rest, with a space after the colon, and so is the
// documented mid-stream error.
var (
	anthropicPing  = []byte("event: ping\ndata: {\"type\": \"ping\"}\n\n")
	anthropicError = []byte("event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n")
)

// anthropicStream renders one Messages stream with a single text block.
type anthropicStream struct {
	p   *Plan
	buf []byte
}

func (e *anthropicStream) contentType() string { return "text/event-stream; charset=utf-8" }

// open starts an event: its name on the event: line, then the data: line
// that the caller appends the JSON to.
func (e *anthropicStream) open(name string) []byte {
	e.buf = append(e.buf[:0], "event: "...)
	e.buf = append(e.buf, name...)
	e.buf = append(e.buf, "\ndata: "...)
	return e.buf
}

// close ends the event in b with pad trailing spaces inside the data line.
func (e *anthropicStream) close(b []byte, pad int) []byte {
	for range pad {
		b = append(b, ' ')
	}
	e.buf = append(b, "\n\n"...)
	return e.buf
}

// start sends message_start, whose usage has the input and a provisional
// output count of 1, the text block's content_block_start and a ping, all
// before the first token as the API does.
func (e *anthropicStream) start(emit func([]byte) bool) bool {
	p := e.p
	b := append(e.open("message_start"), `{"type":"message_start","message":{"id":`...)
	b = appendJSONString(b, p.ID)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = appendJSONString(b, p.Model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(p.PromptTokens), 10)
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`...)
	if !emit(e.close(b, 7)) {
		return false
	}
	b = append(e.open("content_block_start"), `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`...)
	return emit(e.close(b, 6)) && emit(anthropicPing)
}

func (e *anthropicStream) token(i int) []byte {
	b := append(e.open("content_block_delta"), `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`...)
	b = appendJSONString(b, e.p.Tokens[i])
	return e.close(append(b, "}}"...), anthropicPads[i%len(anthropicPads)])
}

// end closes the block, then sends message_delta with the stop reason and
// the cumulative (final) output count, and message_stop.
func (e *anthropicStream) end(emit func([]byte) bool) bool {
	p := e.p
	b := append(e.open("content_block_stop"), `{"type":"content_block_stop","index":0}`...)
	if !emit(e.close(b, 3)) {
		return false
	}
	b = append(e.open("message_delta"), `{"type":"message_delta","delta":{"stop_reason":`...)
	b = appendJSONString(b, p.FinishReason)
	b = append(b, `,"stop_sequence":null},"usage":{"output_tokens":`...)
	b = strconv.AppendInt(b, int64(len(p.Tokens)), 10)
	if !emit(e.close(append(b, "}}"...), 6)) {
		return false
	}
	b = append(e.open("message_stop"), `{"type":"message_stop"}`...)
	return emit(e.close(b, 6))
}

// fail sends the overloaded_error event; no message_stop follows it.
func (e *anthropicStream) fail(emit func([]byte) bool) bool { return emit(anthropicError) }
