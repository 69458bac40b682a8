package meter

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/tokentap/tokentap/sse"
)

// ollamaInfo registers Ollama's native API (/api/chat, /api/generate). It
// streams NDJSON, one object per line, which the Meter frames by its media
// type; with stream:false the same object arrives as one JSON body. Ollama's
// OpenAI-compatible /v1 endpoints are read by openai_chat instead.
var ollamaInfo = DialectInfo{
	Name:     "ollama",
	New:      func() Dialect { return ollama{} },
	Provider: "ollama",
	Matches: func(path string) bool {
		return hasPathSuffix(path, "/api/chat") || hasPathSuffix(path, "/api/generate")
	},
}

func init() { RegisterDialect(ollamaInfo) }

// ollama is stateless: every line is a complete object, and the counts and
// durations arrive together on the last one.
type ollama struct{}

func (ollama) Name() string { return ollamaInfo.Name }

func (ollama) Operation(path string) string {
	if hasPathSuffix(path, "/api/generate") {
		return "text_completion"
	}
	return "chat"
}

// Request reads Ollama's parameters, which live under options rather than at
// the top level as in OpenAI's API.
func (ollama) Request(r *Request, _ string, body []byte) {
	if v := gjson.GetBytes(body, "model"); v.Type == gjson.String {
		r.Model = v.Str
	}
	// Ollama streams unless told not to, so an absent stream field is a
	// known true, not an unknown.
	r.Stream, r.HasStream = true, true
	if v := gjson.GetBytes(body, "stream"); v.IsBool() {
		r.Stream = v.Bool()
	}
	opts := gjson.GetBytes(body, "options")
	if !opts.IsObject() {
		return
	}
	// num_predict -1 (no limit) and -2 (fill the context) are not limits
	// a dashboard can compare with a token count.
	if v := opts.Get("num_predict"); v.Type == gjson.Number && v.Int() >= 0 {
		r.MaxTokens, r.HasMaxTokens = v.Int(), true
	}
	if v := opts.Get("temperature"); v.Type == gjson.Number {
		r.Temperature, r.HasTemperature = v.Float(), true
	}
	if v := opts.Get("top_p"); v.Type == gjson.Number {
		r.TopP, r.HasTopP = v.Float(), true
	}
	readSampling(r, opts, ollamaSampling)
}

func (ollama) Event(o *Observer, ev *sse.Event) {
	readOllamaLine(o, ev.Data)
}

// Body reads a stream:false response. It reads line by line because a
// streamed reply that a proxy in between relabelled application/json is
// still NDJSON, and reading only its first object would lose the counts.
func (ollama) Body(o *Observer, body []byte) {
	for len(body) > 0 {
		line := body
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = nil
		}
		if len(bytes.TrimSpace(line)) > 0 {
			readOllamaLine(o, line)
		}
	}
}

// ollamaDurations are the final object's nanosecond timings and the
// server-timing names they are reported under.
var ollamaDurations = [...]struct{ key, name string }{
	{"total_duration", "total"},
	{"load_duration", "load"},
	{"prompt_eval_duration", "prompt_eval"},
	{"eval_duration", "eval"},
}

// readOllamaLine reads one /api/chat or /api/generate object in one pass
// over its top-level keys, with the raw reader of jsonraw.go: generated
// text is full of escapes, which a decoding reader allocates for.
func readOllamaLine(o *Observer, line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		o.Degrade("event_not_json")
		return
	}
	var (
		gen       eventOutput
		done      bool
		reason    string
		in, out   = int64(-1), int64(-1)
		durations [len(ollamaDurations)]string
	)
	rawMembers(view(line), func(k, v string) bool {
		switch k {
		case "model":
			o.identity(k, v)
		case "message":
			gen.merge(readOllamaMessage(o, v))
		case "response":
			if n := ollamaTextTokens(v); n > 0 {
				gen.add(n, true)
				o.emit(0, TextAnswer, v)
			}
		case "thinking":
			// /api/generate puts a thinking model's reasoning at the top
			// level; it is output, not answer text.
			if n := ollamaTextTokens(v); n > 0 {
				gen.add(n, false)
				o.Reasoning()
				o.emit(0, TextReasoning, v)
			}
		case "done":
			done = rawKindOf(v) == kindTrue
		case "done_reason":
			reason = v
		case "prompt_eval_count":
			if n, ok := rawInt(v); ok {
				in = n
			}
		case "eval_count":
			if n, ok := rawInt(v); ok {
				out = n
			}
		case "error":
			// The message is free text ("model requires more system
			// memory ..."), too varied to be an error type.
			if kind := rawKindOf(v); kind == kindString || kind == kindObject {
				var b rawBuf
				o.Error(errorType(v, b[:0]))
			}
		default:
			for i := range ollamaDurations {
				if k == ollamaDurations[i].key {
					durations[i] = v
				}
			}
		}
		return true
	})
	gen.report(o)
	if !done {
		return
	}
	o.Done()
	var b rawBuf
	if r, ok := rawStr(reason, b[:0]); ok {
		o.FinishReason(0, r)
	}
	// A load or unload reply has no counts at all; a fully cached prompt
	// can omit prompt_eval_count, which then stays unknown rather than 0.
	if in >= 0 || out >= 0 {
		o.Usage(Usage{InputTokens: in, OutputTokens: out, CacheReadInputTokens: -1, CacheCreationInputTokens: -1, ReasoningOutputTokens: -1})
	}
	for i, d := range durations {
		if n, ok := rawInt(d); ok {
			o.ServerTiming(ollamaDurations[i].name, float64(n)/1e9)
		}
	}
}

// readOllamaMessage reads /api/chat's message: content is answer text,
// thinking is reasoning, and tool calls arrive whole, arguments already an
// object, so the call itself is the generated output.
func readOllamaMessage(o *Observer, m string) (out eventOutput) {
	rawMembers(m, func(k, v string) bool {
		switch k {
		case "content":
			if n := ollamaTextTokens(v); n > 0 {
				out.add(n, true)
				o.emit(0, TextAnswer, v)
			}
		case "thinking":
			if n := ollamaTextTokens(v); n > 0 {
				out.add(n, false)
				o.Reasoning()
				o.emit(0, TextReasoning, v)
			}
		case "tool_calls":
			rawValues(v, func(call string) bool {
				if f := rawMember(call, "function"); rawKindOf(f) == kindObject {
					out.add(EstimateTokens(bytesOf(f)), false)
					if o.capturing() {
						emitOllamaCall(o, call, f)
					}
				}
				return true
			})
		}
		return true
	})
	return out
}

// emitOllamaCall hands a text sink a tool call, which Ollama sends whole:
// its id (newer servers send one), name and arguments object.
func emitOllamaCall(o *Observer, call, fn string) {
	item := o.newItem()
	if id := rawMember(call, "id"); rawNonEmptyString(id) {
		o.emit(item, TextToolCallID, id)
	}
	if name := rawMember(fn, "name"); rawNonEmptyString(name) {
		o.emit(item, TextToolCallName, name)
	}
	if args := rawMember(fn, "arguments"); args != "" {
		o.emit(item, TextToolCallArguments, args)
	}
}

// ollamaTextTokens estimates a raw JSON string's tokens; anything else, and
// the empty string that Ollama sends in every non-text object, is none.
func ollamaTextTokens(v string) int64 {
	if t, ok := rawText(v); ok && t != "" {
		return max(EstimateTokens(bytesOf(t)), 1)
	}
	return 0
}
