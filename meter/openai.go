package meter

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/tokentap/tokentap/sse"
)

// openAIChatInfo registers the OpenAI Chat Completions dialect, which is also
// what vLLM, llama.cpp, Ollama's /v1, Groq, DeepSeek, OpenRouter, Together,
// Mistral and Azure OpenAI speak. It also reads the legacy Completions
// (choices[].text) and embeddings (usage only) bodies, which share its shape.
var openAIChatInfo = DialectInfo{
	Name:     "openai_chat",
	New:      func() Dialect { return openAIChat{} },
	Provider: "openai",
	Matches: func(path string) bool {
		return hasPathSuffix(path, "/chat/completions") ||
			hasPathSuffix(path, "/completions") ||
			hasPathSuffix(path, "/embeddings")
	},
}

// openAIChat is stateless: everything it learns goes to the Observer.
type openAIChat struct{}

func (openAIChat) Name() string { return openAIChatInfo.Name }

func (openAIChat) Operation(path string) string {
	switch {
	case hasPathSuffix(path, "/chat/completions"):
		return "chat"
	case hasPathSuffix(path, "/completions"):
		return "text_completion"
	case hasPathSuffix(path, "/embeddings"):
		return "embeddings"
	}
	return "chat"
}

func (openAIChat) Request(r *Request, _ string, body []byte) {
	if v := gjson.GetBytes(body, "model"); v.Type == gjson.String {
		r.Model = v.Str
	}
	if v := gjson.GetBytes(body, "stream"); v.IsBool() {
		r.Stream, r.HasStream = v.Bool(), true
	}
	// max_completion_tokens replaced max_tokens for reasoning models; a
	// client sends one or the other.
	if v := gjson.GetBytes(body, "max_completion_tokens"); v.Type == gjson.Number {
		r.MaxTokens, r.HasMaxTokens = v.Int(), true
	} else if v := gjson.GetBytes(body, "max_tokens"); v.Type == gjson.Number {
		r.MaxTokens, r.HasMaxTokens = v.Int(), true
	}
	if v := gjson.GetBytes(body, "temperature"); v.Type == gjson.Number {
		r.Temperature, r.HasTemperature = v.Float(), true
	}
	if v := gjson.GetBytes(body, "top_p"); v.Type == gjson.Number {
		r.TopP, r.HasTopP = v.Float(), true
	}
	r.IncludeUsage = gjson.GetBytes(body, "stream_options.include_usage").Bool()
}

var doneMarker = []byte("[DONE]")

func (openAIChat) Event(o *Observer, ev *sse.Event) {
	data := bytes.TrimSpace(ev.Data)
	if bytes.Equal(data, doneMarker) {
		o.Done()
		return
	}
	if len(data) == 0 || data[0] != '{' {
		o.Degrade("event_not_json")
		return
	}
	if string(ev.Type) == "error" {
		// openai-python treats an `event: error` as a failure whatever
		// the payload says. llama.cpp's old non-standard error: field
		// (before PR #16109), which the SSE decoder hands out as this
		// type, holds the error object itself rather than wrapping it.
		e := gjson.Get(view(data), "error")
		if !e.IsObject() {
			e = gjson.Parse(view(data))
		}
		o.Error(errorType(e))
		return
	}
	readOpenAIChunk(o, view(data), false)
}

func (openAIChat) Body(o *Observer, body []byte) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		o.Degrade("body_not_json")
		return
	}
	readOpenAIChunk(o, view(body), true)
}

// readOpenAIChunk reads a chat.completion.chunk (or, whole, a chat.completion,
// text_completion or embedding list) in one pass over its top-level keys.
func readOpenAIChunk(o *Observer, s string, whole bool) {
	var tokens int64
	var output, visible, hasUsage bool
	var usage Usage
	var timings gjson.Result
	gjson.Parse(s).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "id":
			if v.Type == gjson.String {
				o.ResponseID(bytesOf(v.Str))
			}
		case "model":
			if v.Type == gjson.String {
				o.Model(bytesOf(v.Str))
			}
		case "choices":
			v.ForEach(func(_, choice gjson.Result) bool {
				n, out, vis := readOpenAIChoice(o, choice)
				tokens += n
				output = output || out
				visible = visible || vis
				return true
			})
		case "usage":
			if v.IsObject() {
				usage, hasUsage = readOpenAIUsage(v), true
				readGroqTimes(o, v)
			}
		case "x_groq":
			// Groq's streams before 2025 report usage only here; newer
			// ones repeat it at the top level.
			if u := v.Get("usage"); u.IsObject() {
				readGroqTimes(o, u)
				if !hasUsage {
					usage, hasUsage = readOpenAIUsage(u), true
				}
			}
		case "timings":
			timings = v
		case "finish_reason":
			// Together's TGI-style chunks carry it beside choices.
			if v.Type == gjson.String {
				o.FinishReason(0, bytesOf(v.Str))
			}
		case "error":
			if v.Exists() && v.Type != gjson.Null && v.Type != gjson.False {
				o.Error(errorType(v))
			}
		case "object":
			// vLLM reports errors as {"object":"error","type":...}.
			if v.Str == "error" {
				o.Error(bytesOf(gjson.Get(s, "type").Str))
			}
		}
		return true
	})
	if timings.IsObject() {
		cached := readLlamaCppTimings(o, timings)
		// timings_per_token puts timings on every chunk; a cache count
		// alone must not make usage "reported", so it only completes a
		// usage object from the same chunk.
		if hasUsage && usage.CacheReadInputTokens < 0 {
			usage.CacheReadInputTokens = cached
		}
	}
	if hasUsage {
		o.Usage(usage)
	}
	if output {
		o.Output(tokens, visible)
	}
}

// readOpenAIChoice reads one element of choices: a streamed delta, a whole
// message, or a legacy completion's text.
func readOpenAIChoice(o *Observer, choice gjson.Result) (tokens int64, output, visible bool) {
	var index int64
	var finish, text gjson.Result
	var delta bool
	choice.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "index":
			index = v.Int()
		case "finish_reason":
			finish = v
		case "delta", "message":
			delta = true
			n, out, vis := readOpenAIDelta(v)
			tokens, output, visible = tokens+n, output || out, visible || vis
		case "text":
			text = v
		}
		return true
	})
	// Together repeats each delta's content in a legacy text field; text
	// is the fragment only when there is no delta.
	if !delta && text.Type == gjson.String && text.Raw != `""` {
		tokens += EstimateTokens(rawString(text))
		output, visible = true, true
	}
	if finish.Type == gjson.String {
		o.FinishReason(index, bytesOf(finish.Str))
	}
	return tokens, output, visible
}

// readOpenAIDelta reads a delta (or message). Answer text is content and
// refusal; reasoning_content (DeepSeek, vLLM, llama.cpp) and reasoning
// (Ollama, Groq, OpenRouter) are output but not visible; so are tool-call
// arguments, which are generated tokens but not answer text. The role and
// OpenAI's obfuscation padding are never output.
func readOpenAIDelta(d gjson.Result) (tokens int64, output, visible bool) {
	d.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "content", "refusal":
			if v.Type == gjson.String && v.Raw != `""` {
				tokens += EstimateTokens(rawString(v))
				output, visible = true, true
			} else if v.IsArray() {
				n, out, vis := readOpenAIContentParts(v)
				tokens, output, visible = tokens+n, output || out, visible || vis
			}
		case "reasoning_content", "reasoning":
			if v.Type == gjson.String && v.Raw != `""` {
				tokens += EstimateTokens(rawString(v))
				output = true
			}
		case "tool_calls":
			v.ForEach(func(_, call gjson.Result) bool {
				if n := argumentTokens(call.Get("function.arguments")); n > 0 {
					tokens += n
					output = true
				}
				return true
			})
		case "function_call":
			if n := argumentTokens(v.Get("arguments")); n > 0 {
				tokens += n
				output = true
			}
		}
		return true
	})
	return tokens, output, visible
}

// readOpenAIContentParts reads content given as typed parts, as Mistral's
// reasoning models stream it: text parts are answer text; thinking parts,
// themselves a list of text parts, are reasoning. Other parts (images,
// references) are not generated text.
func readOpenAIContentParts(parts gjson.Result) (tokens int64, output, visible bool) {
	parts.ForEach(func(_, p gjson.Result) bool {
		var typ, text, thinking gjson.Result
		p.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "type":
				typ = v
			case "text":
				text = v
			case "thinking":
				thinking = v
			}
			return true
		})
		switch typ.Str {
		case "text":
			if text.Type == gjson.String && text.Raw != `""` {
				tokens += EstimateTokens(rawString(text))
				output, visible = true, true
			}
		case "thinking":
			if thinking.Type == gjson.String && thinking.Raw != `""` {
				tokens += EstimateTokens(rawString(thinking))
				output = true
			}
			thinking.ForEach(func(_, t gjson.Result) bool {
				if s := t.Get("text"); s.Type == gjson.String && s.Raw != `""` {
					tokens += EstimateTokens(rawString(s))
					output = true
				}
				return true
			})
		}
		return true
	})
	return tokens, output, visible
}

func argumentTokens(args gjson.Result) int64 {
	if args.Type != gjson.String || args.Raw == `""` {
		return 0
	}
	return EstimateTokens(rawString(args))
}

// readOpenAIUsage reads a usage object. prompt_tokens already includes
// cached tokens and completion_tokens includes reasoning tokens, as semconv
// wants.
func readOpenAIUsage(u gjson.Result) Usage {
	out := unknownUsage
	u.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "prompt_tokens":
			out.InputTokens = v.Int()
		case "completion_tokens":
			out.OutputTokens = v.Int()
		case "prompt_tokens_details":
			if c := v.Get("cached_tokens"); c.Type == gjson.Number {
				out.CacheReadInputTokens = c.Int()
			}
		case "completion_tokens_details":
			if r := v.Get("reasoning_tokens"); r.Type == gjson.Number {
				out.ReasoningOutputTokens = r.Int()
			}
		case "prompt_cache_hit_tokens":
			// DeepSeek's own name for cached input.
			if out.CacheReadInputTokens < 0 {
				out.CacheReadInputTokens = v.Int()
			}
		}
		return true
	})
	return out
}

// groqTimes are the seconds Groq reports beside its token counts (in
// x_groq.usage when streaming, in usage otherwise) and the server-timing
// names they are reported under: queue_time is time waiting for capacity,
// prompt_time prefill, completion_time decode.
var groqTimes = [...]struct{ key, name string }{
	{"queue_time", "queue"},
	{"prompt_time", "prompt"},
	{"completion_time", "completion"},
	{"total_time", "total"},
}

func readGroqTimes(o *Observer, u gjson.Result) {
	var times [len(groqTimes)]gjson.Result
	u.ForEach(func(k, v gjson.Result) bool {
		for i := range groqTimes {
			if k.Str == groqTimes[i].key {
				times[i] = v
			}
		}
		return true
	})
	for i, v := range times {
		if v.Type == gjson.Number {
			o.ServerTiming(groqTimes[i].name, v.Float())
		}
	}
}

// readLlamaCppTimings reads llama.cpp's timings object: prompt_ms
// (prefill) and predicted_ms (decode) become server timings in seconds. It
// returns cache_n, the prompt tokens served from the KV cache, which
// usage.prompt_tokens includes (prompt_tokens = cache_n + prompt_n), or -1.
func readLlamaCppTimings(o *Observer, t gjson.Result) (cached int64) {
	var prompt, predicted, cache gjson.Result
	t.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "prompt_ms":
			prompt = v
		case "predicted_ms":
			predicted = v
		case "cache_n":
			cache = v
		}
		return true
	})
	if prompt.Type == gjson.Number {
		o.ServerTiming("prompt", prompt.Float()/1000)
	}
	if predicted.Type == gjson.Number {
		o.ServerTiming("predicted", predicted.Float()/1000)
	}
	if cache.Type == gjson.Number {
		return cache.Int()
	}
	return -1
}

// errorType names an error object by its type, else its code, else _OTHER.
func errorType(e gjson.Result) []byte {
	if t := e.Get("type"); t.Type == gjson.String && t.Str != "" {
		return bytesOf(t.Str)
	}
	if c := e.Get("code"); c.Type == gjson.String && c.Str != "" {
		return bytesOf(c.Str)
	} else if c.Type == gjson.Number {
		return bytesOf(c.Raw)
	}
	return nil
}

// rawString is the inside of a JSON string token, escapes included.
func rawString(v gjson.Result) []byte {
	r := v.Raw
	if len(r) >= 2 {
		r = r[1 : len(r)-1]
	}
	return bytesOf(r)
}
