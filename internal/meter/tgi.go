package meter

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/tokentap/tokentap/sse"
)

// tgiInfo registers Hugging Face Text Generation Inference's native API:
// /generate_stream (SSE, one event per token) and /generate (one body).
// TGI's OpenAI-style /v1/chat/completions is read by openai_chat.
var tgiInfo = DialectInfo{
	Name:     "tgi",
	New:      func() Dialect { return tgi{} },
	Provider: "tgi",
	Matches: func(path string) bool {
		if hasPathSuffix(path, "/generate_stream") {
			return true
		}
		// Ollama's /api/generate and Cohere's legacy /v1/generate end
		// the same way but speak other formats.
		return hasPathSuffix(path, "/generate") &&
			!hasPathSuffix(path, "/api/generate") && !hasPathSuffix(path, "/v1/generate")
	},
}

func init() { RegisterDialect(tgiInfo) }

// tgi is stateless: each event is one token, and the last one says so by
// carrying the whole generated_text.
type tgi struct{}

func (tgi) Name() string { return tgiInfo.Name }

func (tgi) Operation(string) string { return "text_completion" }

// Request reads TGI's {inputs, parameters, stream} body. TGI serves one
// model and its requests never name it; the path says whether it streams.
func (tgi) Request(r *Request, path string, body []byte) {
	switch {
	case hasPathSuffix(path, "/generate_stream"):
		r.Stream, r.HasStream = true, true
	case hasPathSuffix(path, "/generate"):
		r.Stream, r.HasStream = false, true
	default:
		// TGI's root route streams when the body asks.
		if v := gjson.GetBytes(body, "stream"); v.IsBool() {
			r.Stream, r.HasStream = v.Bool(), true
		}
	}
	p := gjson.GetBytes(body, "parameters")
	if !p.IsObject() {
		return
	}
	if v := p.Get("max_new_tokens"); v.Type == gjson.Number {
		r.MaxTokens, r.HasMaxTokens = v.Int(), true
	}
	if v := p.Get("temperature"); v.Type == gjson.Number {
		r.Temperature, r.HasTemperature = v.Float(), true
	}
	if v := p.Get("top_p"); v.Type == gjson.Number {
		r.TopP, r.HasTopP = v.Float(), true
	}
}

// Event reads one /generate_stream event: {index, token, top_tokens,
// generated_text, details}, or {error, error_type}. It uses the raw reader
// of jsonraw.go: a token's text is often an escape (\n), and the last
// event repeats the whole text, which a decoding reader would copy.
func (tgi) Event(o *Observer, ev *sse.Event) {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 || data[0] != '{' {
		o.Degrade("event_not_json")
		return
	}
	var token, final, details, errMsg, errType string
	rawMembers(view(data), func(k, v string) bool {
		switch k {
		case "token":
			token = v
		case "generated_text":
			final = v
		case "details":
			details = v
		case "error":
			errMsg = v
		case "error_type":
			errType = v
		}
		return true
	})
	if tgiError(o, errMsg, errType) {
		return
	}
	if rawKindOf(token) == kindObject {
		// Every event is exactly one generated token, so counting events
		// is exact even without details. Special tokens (<|eot_id|>) and
		// byte-fallback pieces whose text is still empty are tokens but
		// not text a user sees.
		text := rawMember(token, "text")
		t, ok := rawText(text)
		visible := ok && t != "" && rawKindOf(rawMember(token, "special")) != kindTrue
		o.Output(1, visible)
		if visible {
			o.emit(0, TextAnswer, text)
		}
	}
	// Only the last event has a generated_text; every other has null.
	if rawKindOf(final) != kindString {
		return
	}
	readTGIDetails(o, details)
	o.Done()
}

// readTGIDetails reads details, present when the request asked for them:
// generated_tokens counts every token, special ones included; newer
// servers add input_length to the streamed details, and a non-streamed
// body lists the prompt's tokens in prefill when asked to.
func readTGIDetails(o *Observer, d string) {
	if rawKindOf(d) != kindObject {
		return
	}
	u := unknownUsage
	rawMembers(d, func(k, v string) bool {
		switch k {
		case "finish_reason":
			var b rawBuf
			if r, ok := rawStr(v, b[:0]); ok {
				o.FinishReason(0, r)
			}
		case "generated_tokens":
			if n, ok := rawInt(v); ok {
				u.OutputTokens = n
			}
		case "input_length":
			if n, ok := rawInt(v); ok {
				u.InputTokens = n
			}
		case "prefill":
			if n := rawLen(v); n > 0 && u.InputTokens < 0 {
				u.InputTokens = n
			}
		}
		return true
	})
	if u.InputTokens >= 0 || u.OutputTokens >= 0 {
		o.Usage(u)
	}
}

// Body reads a /generate response: {generated_text, details}, or the
// one-element array that TGI's root route and the Inference API return.
func (tgi) Body(o *Observer, body []byte) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || (body[0] != '{' && body[0] != '[') {
		o.Degrade("body_not_json")
		return
	}
	s := view(body)
	if s[0] == '[' {
		first := ""
		rawElements(s, func(v string) bool {
			first = v
			return false
		})
		s = first
	}
	if tgiError(o, rawMember(s, "error"), rawMember(s, "error_type")) {
		return
	}
	text := rawMember(s, "generated_text")
	if t, ok := rawText(text); ok && t != "" {
		o.Output(max(EstimateTokens(bytesOf(t)), 1), true)
		o.emit(0, TextAnswer, text)
	}
	readTGIDetails(o, rawMember(s, "details"))
}

// tgiError records an error object's error_type when its error (a message)
// is present, and reports whether it was.
func tgiError(o *Observer, msg, typ string) bool {
	if msg == "" || rawKindOf(msg) == kindNull {
		return false
	}
	var b rawBuf
	t, _ := rawStr(typ, b[:0])
	o.Error(t)
	return true
}
