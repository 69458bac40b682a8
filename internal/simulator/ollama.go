package simulator

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
)

// ollama is Ollama's native format, POST /api/chat (chat true) or
// /api/generate: NDJSON, one object a token and a final done:true object
// with the counts and nanosecond durations, or that final object alone with
// the whole text when the request sets stream:false. Streaming is the
// default.
type ollama struct {
	chat bool
}

func (o ollama) name() string {
	if o.chat {
		return FormatOllamaChat
	}
	return FormatOllamaGenerate
}

// id is the plan's id only: Ollama's answers carry none.
func (ollama) id(sum []byte) string { return "sim" + hex.EncodeToString(sum) }

func (o ollama) parse(_ *url.URL, body []byte) (request, error) {
	req, err := parseObject(body, func() *apiError {
		return invalidRequest(http.StatusBadRequest, "", "", "invalid character in request body: not a JSON object")
	})
	if err != nil {
		return request{}, err
	}
	// Ollama answers an empty conversation with a done_reason "load"
	// object; the simulator generates anyway, so every plan has tokens.
	r := request{model: optionalString(req.Get("model")), stream: true}
	if s := req.Get("stream"); s.Exists() && s.Type != gjson.Null {
		r.stream = s.Bool()
	}
	// num_predict: -1 (the default) is unbounded and -2 fills the
	// context, so only a positive value caps.
	v := req.Get("options.num_predict")
	if v.Exists() && v.Type != gjson.Null {
		n, ok := intParam(v, -2)
		if !ok {
			return request{}, invalidRequest(http.StatusBadRequest, "options.num_predict", "",
				"json: cannot unmarshal %s into Go struct field Options.num_predict of type int", v.Raw)
		}
		r.limit = max(n, 0)
	}
	if o.chat {
		for _, m := range req.Get("messages").Array() {
			r.promptBytes += len(optionalString(m.Get("content")))
		}
	} else {
		r.promptBytes = len(optionalString(req.Get("system"))) + len(optionalString(req.Get("prompt")))
	}
	return r, nil
}

// usage is prompt_eval_count and eval_count in the final object unless the
// mode is never: Ollama omits zero counts, so never omits them (the
// durations stay).
func (ollama) usage(mode string, _ request) bool { return alwaysUsage(mode) }

func (ollama) finishReason(capped bool) string {
	if capped {
		return "length"
	}
	return "stop"
}

func (o ollama) stream(p *Plan) streamEncoder { return &ollamaStream{p: p, chat: o.chat} }

// ollamaEpoch is the fixed clock of created_at: the request arrives at it,
// and each object is stamped with its scheduled offset, so that timestamps
// are deterministic yet consistent with the schedule.
var ollamaEpoch = time.Unix(created, 0).UTC()

func ollamaTime(b []byte, offset time.Duration) []byte {
	return ollamaEpoch.Add(offset).AppendFormat(b, time.RFC3339Nano)
}

// ollamaDurations are the final object's server timings, in nanoseconds,
// derived from the schedule: the first token costs one mean decode interval
// (at most the whole time to first token), so eval_count/eval_duration is
// the decode rate the client observes, and the time before it is one part
// load to nine parts prompt evaluation. They add up to total_duration, the
// offset of the last token.
type ollamaDurations struct {
	total, load, promptEval, eval int64
}

func newOllamaDurations(p *Plan) ollamaDurations {
	n := len(p.Tokens)
	first, last := p.Offsets[0], p.Offsets[n-1]
	interval := time.Duration(float64(time.Second) / p.Profile.TokensPerSecond)
	if n > 1 {
		interval = (last - first) / time.Duration(n-1)
	}
	firstToken := min(interval, first)
	before := first - firstToken
	load := before / 10
	return ollamaDurations{
		total:      int64(last),
		load:       int64(load),
		promptEval: int64(before - load),
		eval:       int64(firstToken + last - first),
	}
}

// ollamaStream renders one NDJSON stream.
type ollamaStream struct {
	p    *Plan
	chat bool
	buf  []byte
}

func (e *ollamaStream) contentType() string { return "application/x-ndjson" }

func (e *ollamaStream) start(func([]byte) bool) bool { return true }

// head renders `{"model":…,"created_at":…,` with the time of offset.
func (e *ollamaStream) head(b []byte, offset time.Duration) []byte {
	b = append(b, `{"model":`...)
	b = appendJSONString(b, e.p.Model)
	b = append(b, `,"created_at":"`...)
	b = ollamaTime(b, offset)
	return append(b, `",`...)
}

// The keys that precede the text of an object, which is the value of
// message.content in a chat and of response in a generation.
const (
	ollamaChatText     = `"message":{"role":"assistant","content":`
	ollamaGenerateText = `"response":`
)

// text renders the object's text field, message or response.
func (e *ollamaStream) text(b []byte, text string) []byte {
	if e.chat {
		b = append(b, ollamaChatText...)
		b = appendJSONString(b, text)
		return append(b, '}')
	}
	b = append(b, ollamaGenerateText...)
	return appendJSONString(b, text)
}

func (e *ollamaStream) token(i int) []byte {
	b := e.head(e.buf[:0], e.p.Offsets[i])
	b = e.text(b, e.p.Tokens[i])
	e.buf = append(b, ",\"done\":false}\n"...)
	return e.buf
}

// final renders the done:true object with text, in the field order of
// Ollama's ChatResponse (done_reason before done) or GenerateResponse
// (after it).
func (e *ollamaStream) final(b []byte, text string) []byte {
	p := e.p
	b = e.head(b, p.LastToken())
	b = e.text(b, text)
	if e.chat {
		b = append(b, `,"done_reason":"`...)
		b = append(b, p.FinishReason...)
		b = append(b, `","done":true`...)
	} else {
		b = append(b, `,"done":true,"done_reason":"`...)
		b = append(b, p.FinishReason...)
		b = append(b, '"')
	}
	d := newOllamaDurations(p)
	var prompt, eval int64
	if p.Usage {
		prompt, eval = int64(p.PromptTokens), int64(len(p.Tokens))
	}
	// Ollama's metrics are all omitempty: a zero is left out, not sent.
	for _, m := range [...]struct {
		name string
		v    int64
	}{
		{"total_duration", d.total},
		{"load_duration", d.load},
		{"prompt_eval_count", prompt},
		{"prompt_eval_duration", d.promptEval},
		{"eval_count", eval},
		{"eval_duration", d.eval},
	} {
		if m.v != 0 {
			b = append(b, `,"`...)
			b = append(b, m.name...)
			b = append(b, `":`...)
			b = strconv.AppendInt(b, m.v, 10)
		}
	}
	return append(b, '}')
}

func (e *ollamaStream) end(emit func([]byte) bool) bool {
	return emit(append(e.final(nil, ""), '\n'))
}

// ollamaFailure is the line with which Ollama ends a stream that failed
// after its 200 status.
var ollamaFailure = []byte(`{"error":"an error was encountered while running the model"}` + "\n")

func (e *ollamaStream) fail(emit func([]byte) bool) bool { return emit(ollamaFailure) }

// ollamaBodyType is the Content-Type of Ollama's JSON bodies.
const ollamaBodyType = "application/json; charset=utf-8"

func (o ollama) body(p *Plan) ([]byte, string, int) {
	e := ollamaStream{p: p, chat: o.chat}
	key := ollamaGenerateText
	if o.chat {
		key = ollamaChatText
	}
	textStart := len(e.head(nil, p.LastToken())) + len(key) + len(`"`)
	return e.final(nil, p.Text()), ollamaBodyType, textStart
}

func (ollama) errorBody(e *apiError) ([]byte, string) {
	body, _ := json.Marshal(struct { // a string always marshals
		Error string `json:"error"`
	}{e.Message})
	return body, ollamaBodyType
}
