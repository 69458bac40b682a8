package simulator

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// openAIResponses is OpenAI's Responses format, POST …/v1/responses: an SSE
// stream of event:+data: pairs with sequence numbers, from response.created
// to response.completed (or .incomplete, or .failed), without [DONE]; or
// one response object.
type openAIResponses struct{}

func (openAIResponses) name() string { return FormatOpenAIResponses }

func (openAIResponses) id(sum []byte) string { return "resp_sim" + hex.EncodeToString(sum) }

// responsesItemID is the id of the answer's one message item.
func responsesItemID(p *Plan) string { return "msg_sim" + strings.TrimPrefix(p.ID, "resp_sim") }

// responsesMinOutput is the smallest max_output_tokens the API accepts.
const responsesMinOutput = 16

func (openAIResponses) parse(_ *url.URL, body []byte) (request, error) {
	req, err := parseObject(body, func() *apiError {
		return invalidRequest(http.StatusBadRequest, "", "",
			"We could not parse the JSON body of your request. The OpenAI API expects a JSON payload.")
	})
	if err != nil {
		return request{}, err
	}
	input := req.Get("input")
	if input.Type != gjson.String && !(input.IsArray() && len(input.Array()) > 0) {
		return request{}, invalidRequest(http.StatusBadRequest, "input", "missing_required_parameter",
			"Missing required parameter: 'input'.")
	}
	v := req.Get("max_output_tokens")
	limit, ok := intParam(v, 1)
	if !ok {
		return request{}, invalidRequest(http.StatusBadRequest, "max_output_tokens", "invalid_type",
			"Invalid type for 'max_output_tokens': expected an integer, but got %s instead.", v.Raw)
	}
	if limit != 0 && limit < responsesMinOutput {
		return request{}, invalidRequest(http.StatusBadRequest, "max_output_tokens", "integer_below_min_value",
			"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= %d, but got %d instead.",
			responsesMinOutput, limit)
	}
	r := request{
		model:       optionalString(req.Get("model")),
		stream:      req.Get("stream").Bool(),
		limit:       limit,
		promptBytes: len(optionalString(req.Get("instructions"))),
	}
	if input.Type == gjson.String {
		r.promptBytes += len(input.Str)
	} else {
		for _, item := range input.Array() {
			r.promptBytes += textBytes(item.Get("content"))
		}
	}
	return r, nil
}

// usage is in every terminal response unless the mode is never, which
// leaves it null as response.created has it.
func (openAIResponses) usage(mode string, _ request) bool { return alwaysUsage(mode) }

func (openAIResponses) finishReason(capped bool) string {
	if capped {
		return "max_output_tokens"
	}
	return "completed"
}

// responseObject is the response object, in OpenAI's field order.
type responseObject struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Background         bool               `json:"background"`
	Error              *responseError     `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []responseItem     `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Text               responseText       `json:"text"`
	ToolChoice         string             `json:"tool_choice"`
	Tools              []struct{}         `json:"tools"`
	Usage              *responseUsage     `json:"usage"`
	Metadata           struct{}           `json:"metadata"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

type responseText struct {
	Format struct {
		Type string `json:"type"`
	} `json:"format"`
}

type responseItem struct {
	ID      string         `json:"id"`
	Type    string         `json:"type"`
	Status  string         `json:"status"`
	Content []responsePart `json:"content"`
	Role    string         `json:"role"`
}

type responsePart struct {
	Type        string     `json:"type"`
	Annotations []struct{} `json:"annotations"`
	Logprobs    []struct{} `json:"logprobs"`
	Text        string     `json:"text"`
}

// responseUsage is the usage object: input includes the cached tokens and
// output the reasoning tokens, both zero here.
type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// Response statuses.
const (
	responseInProgress = "in_progress"
	responseCompleted  = "completed"
	responseIncomplete = "incomplete"
	responseFailed     = "failed"
)

// responsesFailure is the simulated mid-stream failure, in both the error
// event and the failed response.
const responsesFailure = "The server had an error while processing your request (simulated mid-stream failure)."

func newResponsePart(text string) responsePart {
	return responsePart{Type: "output_text", Annotations: []struct{}{}, Logprobs: []struct{}{}, Text: text}
}

// responseObj renders p's response object in status. A finished response
// has the output item with the whole text and, if planned, the usage.
func responseObj(p *Plan, status string) responseObject {
	r := responseObject{
		ID:         p.ID,
		Object:     "response",
		CreatedAt:  created,
		Status:     status,
		Model:      p.Model,
		Output:     []responseItem{},
		ToolChoice: "auto",
		Tools:      []struct{}{},
	}
	r.ParallelToolCalls = true
	r.Text.Format.Type = "text"
	if p.MaxTokens > 0 {
		r.MaxOutputTokens = &p.MaxTokens
	}
	switch status {
	case responseCompleted, responseIncomplete:
		r.Output = []responseItem{responseMessage(p, status)}
		if status == responseIncomplete {
			r.IncompleteDetails = &incompleteDetails{Reason: p.FinishReason}
		}
		if p.Usage {
			u := &responseUsage{InputTokens: p.PromptTokens, OutputTokens: len(p.Tokens)}
			u.TotalTokens = u.InputTokens + u.OutputTokens
			r.Usage = u
		}
	case responseFailed:
		r.Error = &responseError{Code: "server_error", Message: responsesFailure}
	}
	return r
}

// responseMessage is the answer's message item in status, with the whole
// text once it is no longer in progress.
func responseMessage(p *Plan, status string) responseItem {
	item := responseItem{ID: responsesItemID(p), Type: "message", Status: status, Content: []responsePart{}, Role: "assistant"}
	if status != responseInProgress {
		item.Content = []responsePart{newResponsePart(p.Text())}
	}
	return item
}

// responsesTextMarker precedes the text in a rendered response; nothing
// before it can contain it, because string values there are JSON-escaped.
const responsesTextMarker = `"type":"output_text","annotations":[],"logprobs":[],"text":"`

func (openAIResponses) body(p *Plan) ([]byte, string, int) {
	status := responseCompleted
	if p.Capped {
		status = responseIncomplete
	}
	body, _ := json.Marshal(responseObj(p, status)) // no value here can fail to marshal
	return body, "application/json", strings.Index(string(body), responsesTextMarker) + len(responsesTextMarker)
}

func (openAIResponses) errorBody(e *apiError) ([]byte, string) { return openAIErrorBody(e) }

func (openAIResponses) stream(p *Plan) streamEncoder {
	return &responsesStream{p: p, itemID: responsesItemID(p)}
}

// responsesStream renders one Responses stream: the lifecycle events of one
// message item with one output_text part, and a delta per token. Sequence
// numbers count every event from 0; token i is event 4+i.
type responsesStream struct {
	p      *Plan
	itemID string
	buf    []byte
}

// responsesFirstDelta is the sequence number of the first delta event.
const responsesFirstDelta = 4

func (e *responsesStream) contentType() string { return "text/event-stream; charset=utf-8" }

// event renders an event whose JSON is fields (without braces) after type
// and sequence_number, the order in which OpenAI sends them.
func (e *responsesStream) event(typ string, seq int, fields []byte) []byte {
	e.buf = e.open(typ, seq)
	e.buf = append(e.buf, fields...)
	e.buf = append(e.buf, "}\n\n"...)
	return e.buf
}

func (e *responsesStream) open(typ string, seq int) []byte {
	b := append(e.buf[:0], "event: "...)
	b = append(b, typ...)
	b = append(b, "\ndata: {\"type\":\""...)
	b = append(b, typ...)
	b = append(b, `","sequence_number":`...)
	b = strconv.AppendInt(b, int64(seq), 10)
	return b
}

// marshalField renders `,"key":value`.
func marshalField(key string, v any) []byte {
	b := append([]byte(`,"`), key...)
	b = append(b, `":`...)
	j, _ := json.Marshal(v) // the simulator's own structs always marshal
	return append(b, j...)
}

func (e *responsesStream) itemFields() []byte {
	return []byte(`,"item_id":"` + e.itemID + `","output_index":0,"content_index":0`)
}

// start sends response.created and response.in_progress (usage null), the
// message item and its empty output_text part.
func (e *responsesStream) start(emit func([]byte) bool) bool {
	p := e.p
	return emit(e.event("response.created", 0, marshalField("response", responseObj(p, responseInProgress)))) &&
		emit(e.event("response.in_progress", 1, marshalField("response", responseObj(p, responseInProgress)))) &&
		emit(e.event("response.output_item.added", 2,
			append([]byte(`,"output_index":0`), marshalField("item", responseMessage(p, responseInProgress))...))) &&
		emit(e.event("response.content_part.added", 3,
			append(e.itemFields(), marshalField("part", newResponsePart(""))...)))
}

// obfuscationAlphabet supplies the obfuscation field of each delta, random
// padding on the wire that hides the token's length (a trap: it is not
// text). The simulator pads every delta to the same length, deterministically.
const obfuscationAlphabet = "WuQNXIPio8PDeczEmdPrt9LmeBsRtk"

func (e *responsesStream) token(i int) []byte {
	tok := e.p.Tokens[i]
	b := e.open("response.output_text.delta", responsesFirstDelta+i)
	b = append(b, `,"item_id":"`...)
	b = append(b, e.itemID...)
	b = append(b, `","output_index":0,"content_index":0,"delta":`...)
	b = appendJSONString(b, tok)
	b = append(b, `,"logprobs":[],"obfuscation":"`...)
	b = append(b, obfuscationAlphabet[:max(1, 16-len(tok))]...)
	e.buf = append(b, "\"}\n\n"...)
	return e.buf
}

// end sends the done events of the text, the part and the item, then the
// terminal response.completed, or response.incomplete when max_output_tokens
// cut the output, with the usage.
func (e *responsesStream) end(emit func([]byte) bool) bool {
	p := e.p
	seq := responsesFirstDelta + len(p.Tokens)
	status, terminal := responseCompleted, "response.completed"
	if p.Capped {
		status, terminal = responseIncomplete, "response.incomplete"
	}
	text := marshalField("text", p.Text())
	return emit(e.event("response.output_text.done", seq, append(append(e.itemFields(), text...), `,"logprobs":[]`...))) &&
		emit(e.event("response.content_part.done", seq+1, append(e.itemFields(), marshalField("part", newResponsePart(p.Text()))...))) &&
		emit(e.event("response.output_item.done", seq+2,
			append([]byte(`,"output_index":0`), marshalField("item", responseMessage(p, status))...))) &&
		emit(e.event(terminal, seq+3, marshalField("response", responseObj(p, status))))
}

// fail sends an error event and then response.failed, as OpenAI does when
// a response fails mid-stream.
func (e *responsesStream) fail(emit func([]byte) bool) bool {
	seq := responsesFirstDelta + e.p.Sent()
	errFields := `,"error":{"type":"server_error","code":"server_error","message":"` + responsesFailure + `","param":null}`
	return emit(e.event("error", seq, []byte(errFields))) &&
		emit(e.event("response.failed", seq+1, marshalField("response", responseObj(e.p, responseFailed))))
}
