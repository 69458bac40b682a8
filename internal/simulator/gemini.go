package simulator

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// gemini is Google's Gemini API format, POST …/models/{model}:generateContent
// (one body) or :streamGenerateContent, which streams SSE with CRLF line ends
// and no terminator under ?alt=sse, and otherwise one JSON array whose
// elements are flushed one by one. The model is in the path, so it is part
// of the format value.
type gemini struct {
	model    string
	streamed bool // :streamGenerateContent
	sse      bool // ?alt=sse
}

// geminiTarget splits a path ending in /models/{model}:{method}, as both the
// Gemini API and Vertex AI's publishers/google/models routes do.
func geminiTarget(path string) (model, method string, ok bool) {
	i := strings.LastIndexByte(path, '/')
	if i < 0 || !strings.HasSuffix(path[:i], "/models") {
		return "", "", false
	}
	model, method, ok = strings.Cut(path[i+1:], ":")
	if !ok || model == "" {
		return "", "", false
	}
	return model, method, true
}

func (gemini) name() string { return FormatGemini }

func (gemini) id(sum []byte) string { return "sim" + hex.EncodeToString(sum) }

func (g gemini) parse(_ *url.URL, body []byte) (request, error) {
	req, err := parseObject(body, func() *apiError {
		return invalidRequest(http.StatusBadRequest, "", "", "Invalid JSON payload received. The request body is not a JSON object.")
	})
	if err != nil {
		return request{}, err
	}
	contents := req.Get("contents")
	if !contents.IsArray() || len(contents.Array()) == 0 {
		return request{}, invalidRequest(http.StatusBadRequest, "contents", "",
			"* GenerateContentRequest.contents: contents is not specified\n")
	}
	v := req.Get("generationConfig.maxOutputTokens")
	limit, ok := intParam(v, 1)
	if !ok {
		return request{}, invalidRequest(http.StatusBadRequest, "generationConfig.maxOutputTokens", "",
			"Invalid value at 'generation_config.max_output_tokens' (TYPE_INT32), %s", v.Raw)
	}
	r := request{
		model:       g.model,
		stream:      g.streamed,
		limit:       limit,
		promptBytes: textBytes(req.Get("systemInstruction.parts")),
	}
	for _, c := range contents.Array() {
		r.promptBytes += textBytes(c.Get("parts"))
	}
	return r, nil
}

// usage is usageMetadata on every chunk unless the mode is never: the
// field is optional (early Vertex chunks lack it), so never omits it.
func (gemini) usage(mode string, _ request) bool { return alwaysUsage(mode) }

func (gemini) finishReason(capped bool) string {
	if capped {
		return "MAX_TOKENS"
	}
	return "STOP"
}

// geminiResponse is a GenerateContentResponse, in Google's field order.
type geminiResponse struct {
	Candidates    []geminiCandidate `json:"candidates"`
	UsageMetadata *geminiUsage      `json:"usageMetadata,omitempty"`
	ModelVersion  string            `json:"modelVersion"`
	ResponseID    string            `json:"responseId"`
}

type geminiCandidate struct {
	Content      geminiContent `json:"content"`
	FinishReason string        `json:"finishReason,omitempty"`
	Index        int           `json:"index"`
}

type geminiContent struct {
	Parts []geminiPart `json:"parts"`
	Role  string       `json:"role"`
}

type geminiPart struct {
	Text string `json:"text"`
}

type geminiUsage struct {
	PromptTokenCount     int                   `json:"promptTokenCount"`
	CandidatesTokenCount int                   `json:"candidatesTokenCount"`
	TotalTokenCount      int                   `json:"totalTokenCount"`
	PromptTokensDetails  []geminiModalityCount `json:"promptTokensDetails"`
}

type geminiModalityCount struct {
	Modality   string `json:"modality"`
	TokenCount int    `json:"tokenCount"`
}

// geminiTextMarker precedes the text in a rendered body; nothing before it
// can contain it, because string values there are JSON-escaped.
const geminiTextMarker = `"text": "`

// geminiJSON is Google's Content-Type for JSON, bodies and arrays alike.
const geminiJSON = "application/json; charset=UTF-8"

// body is pretty-printed, as Google's front end renders non-streamed JSON.
func (gemini) body(p *Plan) ([]byte, string, int) {
	r := geminiResponse{
		Candidates: []geminiCandidate{{
			Content:      geminiContent{Parts: []geminiPart{{Text: p.Text()}}, Role: "model"},
			FinishReason: p.FinishReason,
		}},
		ModelVersion: p.Model,
		ResponseID:   p.ID,
	}
	if p.Usage {
		r.UsageMetadata = &geminiUsage{
			PromptTokenCount:     p.PromptTokens,
			CandidatesTokenCount: len(p.Tokens),
			TotalTokenCount:      p.PromptTokens + len(p.Tokens),
			PromptTokensDetails:  []geminiModalityCount{{Modality: "TEXT", TokenCount: p.PromptTokens}},
		}
	}
	body, _ := json.MarshalIndent(r, "", "  ") // strings and ints always marshal
	body = append(body, '\n')
	return body, geminiJSON, strings.Index(string(body), geminiTextMarker) + len(geminiTextMarker)
}

// geminiStatus is the google.rpc status name Google sends with an HTTP
// status.
func geminiStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusConflict:
		return "ABORTED"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case http.StatusNotImplemented:
		return "UNIMPLEMENTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// geminiError renders Google's pretty-printed error object.
func geminiError(status int, message string) []byte {
	body, _ := json.MarshalIndent(struct { // strings and ints always marshal
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}{Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	}{status, message, geminiStatus(status)}}, "", "  ")
	return append(body, '\n')
}

func (gemini) errorBody(e *apiError) ([]byte, string) {
	return geminiError(e.status, e.Message), geminiJSON
}

// geminiMidStream is the overload error that ends a failing stream: bare
// pretty-printed JSON, not framed as an SSE event even in an SSE stream.
var geminiMidStream = geminiError(http.StatusServiceUnavailable, "The model is overloaded. Please try again later.")

func (g gemini) stream(p *Plan) streamEncoder { return &geminiStream{p: p, sse: g.sse} }

// geminiStream renders one streamed answer, a chunk per token. Every chunk
// carries the cumulative usageMetadata, and the last one the finishReason:
// there is no other end marker.
type geminiStream struct {
	p   *Plan
	sse bool
	buf []byte
}

func (e *geminiStream) contentType() string {
	if e.sse {
		return "text/event-stream"
	}
	return geminiJSON
}

func (e *geminiStream) start(func([]byte) bool) bool { return true }

// token renders chunk i with Google's spacing (a space after each colon,
// none after commas). Under alt=sse it is a data: line and a blank line,
// each ended by CRLF; otherwise an array element, opening the array when it
// is the first.
func (e *geminiStream) token(i int) []byte {
	p := e.p
	b := e.buf[:0]
	switch {
	case e.sse:
		b = append(b, "data: "...)
	case i == 0:
		b = append(b, '[')
	default:
		b = append(b, ',')
	}
	b = append(b, `{"candidates": [{"content": {"parts": [{"text": `...)
	b = appendJSONString(b, p.Tokens[i])
	b = append(b, `}],"role": "model"}`...)
	if i == len(p.Tokens)-1 && p.Fault == FaultNone {
		b = append(b, `,"finishReason": "`...)
		b = append(b, p.FinishReason...)
		b = append(b, '"')
	}
	b = append(b, `,"index": 0}]`...)
	if p.Usage {
		b = append(b, `,"usageMetadata": {"promptTokenCount": `...)
		b = strconv.AppendInt(b, int64(p.PromptTokens), 10)
		b = append(b, `,"candidatesTokenCount": `...)
		b = strconv.AppendInt(b, int64(i+1), 10)
		b = append(b, `,"totalTokenCount": `...)
		b = strconv.AppendInt(b, int64(p.PromptTokens+i+1), 10)
		b = append(b, `,"promptTokensDetails": [{"modality": "TEXT","tokenCount": `...)
		b = strconv.AppendInt(b, int64(p.PromptTokens), 10)
		b = append(b, "}]}"...)
	}
	b = append(b, `,"modelVersion": `...)
	b = appendJSONString(b, p.Model)
	b = append(b, `,"responseId": `...)
	b = appendJSONString(b, p.ID)
	b = append(b, '}')
	if e.sse {
		b = append(b, "\r\n\r\n"...)
	} else {
		b = append(b, "\r\n"...)
	}
	e.buf = b
	return b
}

// end closes the array; an SSE stream just ends, after the chunk with the
// finishReason.
func (e *geminiStream) end(emit func([]byte) bool) bool {
	return e.sse || emit([]byte("]"))
}

// fail sends the bare overload error; in the array form it is one more
// element, after which the array is closed.
func (e *geminiStream) fail(emit func([]byte) bool) bool {
	if e.sse {
		return emit(geminiMidStream)
	}
	sep := byte(',')
	if e.p.Sent() == 0 {
		sep = '['
	}
	return emit(append([]byte{sep}, geminiMidStream...)) && emit([]byte("]"))
}
