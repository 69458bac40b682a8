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
// generated_text, details}, or {error, error_type}.
func (tgi) Event(o *Observer, ev *sse.Event) {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 || data[0] != '{' {
		o.Degrade("event_not_json")
		return
	}
	var token, final, details, errMsg, errType gjson.Result
	gjson.Parse(view(data)).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
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
	if errMsg.Exists() && errMsg.Type != gjson.Null {
		o.Error(bytesOf(errType.Str))
		return
	}
	if token.IsObject() {
		// Every event is exactly one generated token, so counting events
		// is exact even without details. Special tokens (<|eot_id|>) and
		// byte-fallback pieces whose text is still empty are tokens but
		// not text a user sees.
		text := token.Get("text")
		visible := token.Get("special").Type != gjson.True && text.Type == gjson.String && text.Raw != `""`
		o.Output(1, visible)
	}
	// Only the last event has a generated_text; every other has null.
	if final.Type != gjson.String {
		return
	}
	readTGIDetails(o, details)
	o.Done()
}

// readTGIDetails reads details, present when the request asked for them:
// generated_tokens counts every token, special ones included; newer
// servers add input_length to the streamed details, and a non-streamed
// body lists the prompt's tokens in prefill when asked to.
func readTGIDetails(o *Observer, d gjson.Result) {
	if !d.IsObject() {
		return
	}
	u := unknownUsage
	d.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "finish_reason":
			if v.Type == gjson.String {
				o.FinishReason(0, bytesOf(v.Str))
			}
		case "generated_tokens":
			if v.Type == gjson.Number {
				u.OutputTokens = v.Int()
			}
		case "input_length":
			if v.Type == gjson.Number {
				u.InputTokens = v.Int()
			}
		case "prefill":
			if n := v.Get("#").Int(); n > 0 && u.InputTokens < 0 {
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
	r := gjson.Parse(view(body))
	if r.IsArray() {
		r = r.Get("0")
	}
	if e := r.Get("error"); e.Exists() && e.Type != gjson.Null {
		o.Error(bytesOf(r.Get("error_type").Str))
		return
	}
	if t := r.Get("generated_text"); t.Type == gjson.String && t.Raw != `""` {
		o.Output(max(EstimateTokens(rawString(t)), 1), true)
	}
	readTGIDetails(o, r.Get("details"))
}
