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
	readRequest(r, body, openAIChatRequest)
	readServiceTier(r, body)
	readSampling(r, gjson.ParseBytes(body), openAIChatSampling)
	r.IncludeUsage = gjson.GetBytes(body, "stream_options.include_usage").Bool()
}

var doneMarker = []byte("[DONE]")

// DoneTerminated implements DoneTerminated: data: [DONE] ends a Chat
// Completions stream.
func (openAIChat) DoneTerminated() {}

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
	s := view(data)
	if string(ev.Type) == "error" {
		// openai-python treats an `event: error` as a failure whatever
		// the payload says. llama.cpp's old non-standard error: field
		// (before PR #16109), which the SSE decoder hands out as this
		// type, holds the error object itself rather than wrapping it.
		e := rawMember(s, "error")
		if rawKindOf(e) != kindObject {
			e = s
		}
		var b rawBuf
		o.Error(errorType(e, b[:0]))
		return
	}
	readOpenAIChunk(o, s)
}

func (openAIChat) Body(o *Observer, body []byte) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		o.Degrade("body_not_json")
		return
	}
	readOpenAIChunk(o, view(body))
}

// readOpenAIChunk reads a chat.completion.chunk (or, whole, a chat.completion,
// text_completion or embedding list) in one pass over its top-level keys,
// descending into choices and each delta as it meets them (rawWalkMembers),
// so that no byte of them is scanned twice. Like every reader on the
// per-event path it uses the raw reader of jsonraw.go, because text deltas
// and tool-call arguments are full of escapes that a decoding reader would
// allocate for.
//
// A stream's chunks repeat their first members byte for byte (id, object,
// created, model, system_fingerprint), and those change nothing once read.
// So the walk resumes after the head the last chunk began with when this
// one begins with the same bytes (Observer.head), and a stream's head is
// read once, not once a chunk.
func readOpenAIChunk(o *Observer, s string) {
	var out eventOutput
	var hasUsage bool
	var usage Usage
	var timings string
	from := o.head.skip(s)
	// While the head is being found, headEnd is where it ends so far: the
	// start of the member after the last one it holds.
	finding, headEnd, members := from == 0, 0, 0
	// identityLate is set when an identity member comes after the head:
	// then skipping the head next time would leave that member's value
	// where the head's should be.
	identityLate := false
	walk := func(k, rest string) int {
		if finding {
			if !openAIHeadMember(k, rest) {
				finding = false
				if members > 0 {
					headEnd = max(rawKeyStart(s, len(s)-len(rest), len(k)), 0)
				}
			}
			members++
		} else if isIdentityKey(k) {
			identityLate = true
		}
		if k == "choices" {
			return rawWalkValues(rest, func(choice string) int {
				c, end := readOpenAIChoice(o, choice)
				out.merge(c)
				return end
			})
		}
		v := rawValueAt(rest)
		var b rawBuf
		switch k {
		case "id", "model", "service_tier", "system_fingerprint":
			o.identity(k, v)
		case "usage":
			if rawKindOf(v) == kindObject {
				usage, hasUsage = readOpenAIUsage(v), true
				readGroqTimes(o, v)
			}
		case "x_groq":
			// Groq's streams before 2025 report usage only here; newer
			// ones repeat it at the top level.
			if u := rawMember(v, "usage"); rawKindOf(u) == kindObject {
				readGroqTimes(o, u)
				if !hasUsage {
					usage, hasUsage = readOpenAIUsage(u), true
				}
			}
		case "timings":
			timings = v
		case "finish_reason":
			// Together's TGI-style chunks carry it beside choices.
			if r, ok := rawStr(v, b[:0]); ok {
				o.FinishReason(0, r)
			}
		case "error":
			if kind := rawKindOf(v); kind != kindNull && kind != kindFalse {
				o.Error(errorType(v, b[:0]))
			}
		case "object":
			switch v {
			case `"error"`:
				// vLLM reports errors as {"object":"error","type":...}.
				t, _ := rawStr(rawMember(s, "type"), b[:0])
				o.Error(t)
			case `"chat.completion.done"`:
				// Perplexity ends its streams with this chunk and no
				// [DONE] (testdata/recorded/README.md has the evidence).
				o.Done()
			}
		}
		return len(v)
	}
	if from > 0 {
		// The head ends where a key began; this chunk may have more space
		// there, as the whole walk would skip after the comma.
		rawWalkMembersFrom(s, rawSkipSpace(s, from), walk)
	} else {
		rawWalkMembers(s, walk)
	}
	switch {
	case identityLate:
		o.head.clear()
	case from == 0:
		o.head.set(s[:headEnd])
	}
	if rawKindOf(timings) == kindObject {
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
	out.report(o)
}

// openAIHeadMember reports whether the top-level member k, whose value
// starts rest, may be skipped when a chunk repeats it: the identity
// members, which record only a change, and the members readOpenAIChunk
// ignores. The others act on every chunk that has them.
func openAIHeadMember(k, rest string) bool {
	switch k {
	case "choices", "usage", "x_groq", "timings", "finish_reason", "error":
		return false
	case "object":
		v := rawValueAt(rest)
		return v != `"error"` && v != `"chat.completion.done"`
	}
	return true
}

// isIdentityKey reports whether k is a member Observer.identity reads.
func isIdentityKey(k string) bool {
	return k == "id" || k == "model" || k == "service_tier" || k == "system_fingerprint"
}

// readOpenAIChoice reads the element of choices at the start of rest: a
// streamed delta, a whole message, or a legacy completion's text. end is
// its length, as a walker's callback returns it.
func readOpenAIChoice(o *Observer, rest string) (out eventOutput, end int) {
	var index int64
	var finish, text string
	var delta bool
	if rawKindOf(rest) != kindObject {
		return out, 0
	}
	if o.capturing() {
		// The index may come after the delta; captured text needs it
		// first.
		o.setChoice(rawLooseInt(rawMember(rest, "index")))
	}
	end = rawWalkMembers(rest, func(k, rest string) int {
		if k == "delta" || k == "message" {
			delta = true
			d, end := readOpenAIDelta(o, rest)
			out.merge(d)
			return end
		}
		v := rawValueAt(rest)
		switch k {
		case "index":
			index = rawLooseInt(v)
		case "finish_reason":
			finish = v
		case "text":
			text = v
		}
		return len(v)
	})
	// Together repeats each delta's content in a legacy text field; text
	// is the fragment only when there is no delta.
	if t, ok := rawText(text); ok && !delta && t != "" {
		out.add(o.streamedTokens(t), true)
		o.emit(0, TextAnswer, text)
	}
	var b rawBuf
	if r, ok := rawStr(finish, b[:0]); ok {
		o.FinishReason(index, r)
	}
	return out, end
}

// readOpenAIDelta reads the delta (or message) at the start of rest and
// returns its length with what it held. Answer text is content and
// refusal; reasoning_content (DeepSeek, vLLM, llama.cpp) and reasoning
// (Ollama, Groq, OpenRouter) are output but not visible; so are a tool
// call's name and arguments, which are generated tokens but not answer
// text: the delta that names a call (its arguments still "") is its first
// token. The role and OpenAI's obfuscation padding are never output. A
// delta that is not an object (null in some servers' last chunk) is
// skipped as a value.
func readOpenAIDelta(o *Observer, rest string) (out eventOutput, end int) {
	if rawKindOf(rest) != kindObject {
		return out, 0
	}
	end = rawWalkMembers(rest, func(k, rest string) int {
		v := rawValueAt(rest)
		switch k {
		case "content", "refusal":
			if t, ok := rawText(v); ok && t != "" {
				out.add(o.streamedTokens(t), true)
				o.emit(0, TextAnswer, v)
			} else if rawKindOf(v) == kindArray {
				out.merge(readOpenAIContentParts(o, v))
			}
		case "reasoning_content", "reasoning":
			if t, ok := rawText(v); ok && t != "" {
				out.add(o.streamedTokens(t), false)
				o.Reasoning()
				o.emit(0, TextReasoning, v)
			}
		case "tool_calls":
			rawValues(v, func(call string) bool {
				fn, item := rawMember(call, "function"), 0
				if o.capturing() {
					item = int(rawLooseInt(rawMember(call, "index")))
					emitOpenAIToolCall(o, item, rawMember(call, "id"), fn)
				}
				if n := callTokens(o, item, fn); n > 0 {
					out.add(n, false)
				}
				return true
			})
		case "function_call":
			if o.capturing() {
				emitOpenAIToolCall(o, 0, "", v)
			}
			if n := callTokens(o, 0, v); n > 0 {
				out.add(n, false)
			}
		}
		return len(v)
	})
	return out, end
}

// readOpenAIContentParts reads content given as typed parts, as Mistral's
// reasoning models stream it: text parts are answer text; thinking parts,
// themselves a list of text parts, are reasoning. Other parts (images,
// references) are not generated text. Type tags are compared as written,
// as keys are.
func readOpenAIContentParts(o *Observer, parts string) (out eventOutput) {
	rawElements(parts, func(p string) bool {
		var typ, text, thinking string
		rawMembers(p, func(k, v string) bool {
			switch k {
			case "type":
				typ = v
			case "text":
				text = v
			case "thinking":
				thinking = v
			}
			return true
		})
		switch typ {
		case `"text"`:
			if t, ok := rawText(text); ok && t != "" {
				out.add(o.streamedTokens(t), true)
				o.emit(0, TextAnswer, text)
			}
		case `"thinking"`:
			if t, ok := rawText(thinking); ok && t != "" {
				out.add(o.streamedTokens(t), false)
				o.Reasoning()
				o.emit(0, TextReasoning, thinking)
			}
			rawValues(thinking, func(part string) bool {
				if raw := rawMember(part, "text"); rawNonEmptyString(raw) {
					out.add(o.streamedTokens(raw[1:len(raw)-1]), false)
					o.Reasoning()
					o.emit(0, TextReasoning, raw)
				}
				return true
			})
		}
		return true
	})
	return out
}

// callTokens estimates what a streamed function object holds: the call's
// name, which comes once, in its first delta, and is generated output like
// its arguments; and an arguments fragment. item is the call's index, for a
// text sink.
func callTokens(o *Observer, item int, fn string) (tokens int64) {
	var name, args string
	rawMembers(fn, func(k, v string) bool {
		switch k {
		case "name":
			name = v
		case "arguments":
			args = v
		}
		return true
	})
	if t, ok := rawText(name); ok && t != "" {
		tokens += o.streamedTokens(t)
	}
	return tokens + argumentTokens(o, item, args)
}

// argumentTokens estimates a tool call's arguments fragment, a raw JSON
// string; the "" that starts a call is no token. item is the call's index,
// for a text sink.
func argumentTokens(o *Observer, item int, args string) int64 {
	if t, ok := rawText(args); ok && t != "" {
		o.emit(item, TextToolCallArguments, args)
		return o.streamedTokens(t)
	}
	return 0
}

// emitOpenAIToolCall hands a text sink the id and name of a streamed tool
// call, which come in its first delta.
func emitOpenAIToolCall(o *Observer, item int, id, fn string) {
	if rawNonEmptyString(id) {
		o.emit(item, TextToolCallID, id)
	}
	if name := rawMember(fn, "name"); rawNonEmptyString(name) {
		o.emit(item, TextToolCallName, name)
	}
}

// rawNonEmptyString reports whether raw is a JSON string with something in
// it.
func rawNonEmptyString(raw string) bool {
	return len(raw) > 2 && raw[0] == '"' && raw[len(raw)-1] == '"'
}

// readOpenAIUsage reads a usage object. prompt_tokens already includes
// the tokens read from the prompt cache (cached_tokens) and those written
// to it (cache_write_tokens), as semconv's input count does: the recorded
// OpenRouter bodies' own usage.cost prices exactly that split
// (docs/telemetry.md). The two counts are read loosely (a null is 0, not
// unknown), as they always were.
//
// Output must include reasoning (measurement.go). OpenAI's
// completion_tokens does; xAI's Chat Completions does not: its
// total_tokens is prompt + completion + reasoning (recorded: 12 + 2 + 340 =
// 354). Which one a usage object follows is decided from its numbers, not
// from the host, since the same models are served through OpenRouter,
// Azure and others; see reasoningOutsideCompletion.
func readOpenAIUsage(u string) Usage {
	out := unknownUsage
	total := int64(-1)
	rawMembers(u, func(k, v string) bool {
		switch k {
		case "prompt_tokens":
			out.InputTokens = rawLooseInt(v)
		case "total_tokens":
			if n, ok := rawInt(v); ok {
				total = n
			}
		case "completion_tokens":
			out.OutputTokens = rawLooseInt(v)
		case "prompt_tokens_details":
			rawMembers(v, func(k, v string) bool {
				switch k {
				case "cached_tokens":
					if n, ok := rawInt(v); ok {
						out.CacheReadInputTokens = n
					}
				case "cache_write_tokens":
					if n, ok := rawCount(v); ok {
						out.CacheCreationInputTokens = n
					}
				}
				return true
			})
		case "completion_tokens_details":
			if r, ok := rawInt(rawMember(v, "reasoning_tokens")); ok {
				out.ReasoningOutputTokens = r
			}
		case "prompt_cache_hit_tokens":
			// DeepSeek's own name for cached input.
			if out.CacheReadInputTokens < 0 {
				out.CacheReadInputTokens = rawLooseInt(v)
			}
		}
		return true
	})
	if reasoningOutsideCompletion(out.InputTokens, out.OutputTokens, out.ReasoningOutputTokens, total) {
		out.OutputTokens += out.ReasoningOutputTokens
	}
	return out
}

// reasoningOutsideCompletion reports whether a usage object counts
// reasoning tokens apart from its completion tokens. The total says so
// when it is there: prompt + completion + reasoning (xAI) against prompt +
// completion (OpenAI). Without a total, or with one that adds up neither
// way, a completion count smaller than the reasoning count can only be one
// that leaves reasoning out.
func reasoningOutsideCompletion(prompt, completion, reasoning, total int64) bool {
	if reasoning <= 0 || completion < 0 {
		return false
	}
	if total >= 0 && prompt >= 0 {
		switch total {
		case prompt + completion + reasoning:
			return true
		case prompt + completion:
			return false
		}
	}
	return completion < reasoning
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

func readGroqTimes(o *Observer, u string) {
	var times [len(groqTimes)]string
	rawMembers(u, func(k, v string) bool {
		for i := range groqTimes {
			if k == groqTimes[i].key {
				times[i] = v
			}
		}
		return true
	})
	for i, v := range times {
		if f, ok := rawFloat(v); ok {
			o.ServerTiming(groqTimes[i].name, f)
		}
	}
}

// readLlamaCppTimings reads llama.cpp's timings object: prompt_ms
// (prefill) and predicted_ms (decode) become server timings in seconds. It
// returns cache_n, the prompt tokens served from the KV cache, which
// usage.prompt_tokens includes (prompt_tokens = cache_n + prompt_n), or -1.
func readLlamaCppTimings(o *Observer, t string) (cached int64) {
	var prompt, predicted, cache string
	rawMembers(t, func(k, v string) bool {
		switch k {
		case "prompt_ms":
			prompt = v
		case "predicted_ms":
			predicted = v
		case "cache_n":
			cache = v
		}
		return true
	})
	if f, ok := rawFloat(prompt); ok {
		o.ServerTiming("prompt", f/1000)
	}
	if f, ok := rawFloat(predicted); ok {
		o.ServerTiming("predicted", f/1000)
	}
	if n, ok := rawInt(cache); ok {
		return n
	}
	return -1
}

// errorType names an error object by its type, else its code, else nil
// (which Observer.Error records as _OTHER). A string is decoded into buf
// if it has escapes.
func errorType(e string, buf []byte) []byte {
	if t, ok := rawStr(rawMember(e, "type"), buf); ok && len(t) > 0 {
		return t
	}
	switch c := rawMember(e, "code"); rawKindOf(c) {
	case kindString:
		if s, _ := rawStr(c, buf); len(s) > 0 {
			return s
		}
	case kindNumber:
		return bytesOf(c)
	}
	return nil
}
