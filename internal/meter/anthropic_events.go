package meter

// Anthropic's Messages format, read for two dialects: anthropic_messages,
// and bedrock_invoke, whose chunks and bodies carry Claude's events and
// Messages unchanged. Both call these functions, each with its own
// usageParts (Bedrock's also takes its invocation metrics), so that one
// model's output is measured alike whichever API it came through: two
// copies of this reading had drifted apart.

// anthropicEvent is one streamed event's members, gathered by member as
// the raw reader meets them (see jsonraw.go), so a caller that reads
// members of its own from the same object (Bedrock's invocation metrics,
// Llama's fields) still passes over the event once.
type anthropicEvent struct {
	typ, index, message, delta, usage, errObj, block string
}

// member keeps k's value if the event is read from it. It always returns
// true, so that rawMembers goes on.
func (e *anthropicEvent) member(k, v string) bool {
	switch k {
	case "type":
		e.typ = v
	case "index":
		e.index = v
	case "message":
		e.message = v
	case "delta":
		e.delta = v
	case "usage":
		e.usage = v
	case "error":
		e.errObj = v
	case "content_block":
		e.block = v
	}
	return true
}

// read reports the event. Its kind is the JSON "type", which Anthropic
// always repeats, else name, the SSE event name (nil inside Bedrock's
// chunks, which have none); an `event: error` is a failure whatever its
// payload says, as in Anthropic's SDKs. usage holds the exchange's input
// parts.
func (e *anthropicEvent) read(o *Observer, usage *usageParts, name []byte) {
	kind, ok := rawText(e.typ)
	if !ok {
		kind = view(name)
	}
	if string(name) == "error" {
		kind = "error"
	}
	switch kind {
	case "content_block_delta":
		anthropicDelta(o, e.delta, e.index)
	case "content_block_start":
		// Blocks start empty; a text or thinking block that arrives with
		// its text already in it (some compatible servers) is output. A
		// tool_use or server_tool_use block starts with the tool's name,
		// generated output and so the call's first token, and
		// "input":{}, which is not generated yet: its arguments follow as
		// input_json_delta.
		anthropicDelta(o, e.block, e.index)
	case "message_start":
		// Its usage.output_tokens is not the response's: a placeholder,
		// or the first sampling's where the server sampled before the
		// stream began (35 on the recorded advisor stream), which the
		// message_delta replaces; a truncated stream is better served by
		// the estimate.
		anthropicMessage(o, usage, e.message, false)
	case "message_delta":
		rawMembers(e.delta, func(k, v string) bool {
			if k == "stop_reason" {
				var b rawBuf
				if r, ok := rawStr(v, b[:0]); ok {
					o.FinishReason(0, r)
				}
				return false
			}
			return true
		})
		anthropicUsageRead(o, usage, e.usage, true)
	case "message_stop":
		o.Done()
	case "error":
		var b rawBuf
		o.Error(anthropicErrorType(e.errObj, b[:0]))
	}
	// ping, content_block_stop and unknown types ("new event types may be
	// added") are chunks, not tokens.
}

// anthropicDelta reads a content_block_delta's delta, or a content block:
// text is visible; thinking, a tool_use or server_tool_use block's name
// and tool input are output but not visible.
// signature_delta (the end of a thinking block), citations_delta (cited
// text is not generated, nor billed as output) and redacted_thinking (an
// encrypted blob) carry no countable text. index is the content block's,
// for a text sink.
func anthropicDelta(o *Observer, d, index string) {
	var typ, text, thinking, partial, compaction, name string
	rawMembers(d, func(k, v string) bool {
		switch k {
		case "type":
			typ = v
		case "text":
			text = v
		case "thinking":
			thinking = v
		case "partial_json":
			partial = v
		case "content":
			// compaction_delta: the summary the model wrote of the
			// conversation so far, generated output.
			compaction = v
		case "name":
			name = v
		}
		return true
	})
	var out string
	visible, reasoning := false, false
	kind := TextAnswer
	switch typ {
	case `"text_delta"`, `"text"`:
		out, visible = text, true
	case `"thinking_delta"`, `"thinking"`:
		out, kind, reasoning = thinking, TextReasoning, true
	case `"input_json_delta"`:
		// The first one of every tool_use block is "" and is not a token.
		out, kind = partial, TextToolCallArguments
	case `"compaction_delta"`:
		out, kind = compaction, TextReasoning
	case `"tool_use"`, `"server_tool_use"`, `"mcp_tool_use"`:
		if s, ok := rawText(name); ok && s != "" {
			o.Output(estimateText(bytesOf(s)), false)
		}
		if o.capturing() {
			emitAnthropicToolUse(o, int(rawLooseInt(index)), d)
		}
		return
	default:
		return
	}
	if s, ok := rawText(out); ok && s != "" {
		if reasoning {
			o.Reasoning()
		}
		o.Output(estimateText(bytesOf(s)), visible)
		if o.capturing() {
			o.emit(int(rawLooseInt(index)), kind, out)
		}
	}
}

// emitAnthropicToolUse hands a text sink the id and name of a tool_use
// block as it starts, and its input if a server sent it whole there
// rather than as input_json_delta.
func emitAnthropicToolUse(o *Observer, item int, block string) {
	rawMembers(block, func(k, v string) bool {
		switch k {
		case "id":
			if rawNonEmptyString(v) {
				o.emit(item, TextToolCallID, v)
			}
		case "name":
			if rawNonEmptyString(v) {
				o.emit(item, TextToolCallName, v)
			}
		case "input":
			// Streamed blocks start with an empty object, whose
			// arguments follow as input_json_delta.
			empty := true
			rawMembers(v, func(string, string) bool {
				empty = false
				return false
			})
			if !empty {
				o.emit(item, TextToolCallArguments, v)
			}
		}
		return true
	})
}

// anthropicMessage reads a Message object: message_start's, or a whole
// non-streamed body's. When whole it returns the estimated tokens of its
// content, for servers that report no usage.
func anthropicMessage(o *Observer, usage *usageParts, msg string, whole bool) (tokens int64) {
	rawMembers(msg, func(k, v string) bool {
		var b rawBuf
		switch k {
		case "id", "model":
			o.identity(k, v)
		case "stop_reason":
			if s, ok := rawStr(v, b[:0]); ok {
				o.FinishReason(0, s)
			}
		case "usage":
			anthropicUsageRead(o, usage, v, whole)
		case "content":
			if whole {
				tokens = anthropicContentTokens(o, v)
			}
		}
		return true
	})
	return tokens
}

// anthropicContentTokens estimates a whole message's generated content:
// text, thinking and tool input (read as raw JSON, close to how its
// streamed partial_json would count), and hands it to a text sink.
func anthropicContentTokens(o *Observer, content string) (tokens int64) {
	item := 0
	rawElements(content, func(b string) bool {
		var typ, input, text, thinking string
		rawMembers(b, func(k, v string) bool {
			switch k {
			case "type":
				typ = v
			case "text":
				text = v
			case "thinking":
				thinking = v
			case "input":
				input = v
			}
			return true
		})
		if s, ok := rawText(text); ok {
			tokens += estimateText(bytesOf(s))
			o.emit(item, TextAnswer, text)
		}
		if s, ok := rawText(thinking); ok {
			tokens += estimateText(bytesOf(s))
			o.emit(item, TextReasoning, thinking)
		}
		if typ == `"tool_use"` && len(input) > 0 && input[0] == '{' {
			tokens += estimateText(bytesOf(input))
			if o.capturing() {
				emitAnthropicToolUse(o, item, b)
			}
		}
		item++
		return true
	})
	return tokens
}

// anthropicUsageRead merges a usage object into usage. Every field is
// cumulative, so each takes its latest value. withOutput is false for
// message_start, whose output count is a placeholder, and so is its
// breakdown into thinking tokens: a stream cut before message_delta has
// its output estimated and its reasoning unknown, not a placeholder's 0.
func anthropicUsageRead(o *Observer, usage *usageParts, u string, withOutput bool) {
	names := anthropicUsage
	if !withOutput {
		names.output, names.details = "", ""
	}
	usage.read(o, u, names)
}

// anthropicBody reads a whole response: a Message, or an error object.
func anthropicBody(o *Observer, usage *usageParts, body string) {
	var typ, errObj string
	rawMembers(body, func(k, v string) bool {
		switch k {
		case "type":
			typ = v
		case "error":
			errObj = v
		}
		return true
	})
	if typ == `"error"` {
		var b rawBuf
		o.Error(anthropicErrorType(errObj, b[:0]))
		return
	}
	if n := anthropicMessage(o, usage, body, true); n > 0 {
		o.Output(n, true)
	}
}

// anthropicErrorType is the error object's type, e.g. "overloaded_error",
// decoded into buf if it has escapes.
func anthropicErrorType(e string, buf []byte) []byte {
	typ, _ := rawStr(rawMember(e, "type"), buf)
	return typ
}
