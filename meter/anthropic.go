package meter

import (
	"bytes"

	"github.com/tokentap/tokentap/sse"
)

// anthropicMessagesInfo registers Anthropic's Messages API. Only /v1/messages
// is claimed: a bare "/messages" suffix would also take OpenAI's Assistants
// thread messages, and /v1/messages/count_tokens is not a generation.
var anthropicMessagesInfo = DialectInfo{
	Name:     "anthropic_messages",
	New:      func() Dialect { return newAnthropicMessages() },
	Provider: "anthropic",
	Matches:  func(path string) bool { return hasPathSuffix(path, "/v1/messages") },
}

func init() {
	RegisterDialect(anthropicMessagesInfo)
	// Anthropic's error types recur on every failing exchange; interning
	// them keeps Observer.Error from allocating for each one.
	for _, s := range []string{
		"authentication_error", "permission_error", "not_found_error",
		"request_too_large", "rate_limit_error", "billing_error", "timeout_error",
	} {
		interned[s] = s
	}
}

// anthropicMessages keeps the three parts of the input count, because
// Anthropic reports input_tokens without the cached tokens and semconv wants
// their sum: when a later message_delta repeats only some of the parts, the
// sum still needs the others.
type anthropicMessages struct {
	usage usageParts
}

func newAnthropicMessages() *anthropicMessages {
	return &anthropicMessages{usage: newUsageParts()}
}

// Name implements Dialect.
func (*anthropicMessages) Name() string { return anthropicMessagesInfo.Name }

// Operation implements Dialect: the Messages API only chats.
func (*anthropicMessages) Operation(string) string { return "chat" }

// Request implements Dialect.
func (*anthropicMessages) Request(r *Request, _ string, body []byte) {
	readRequest(r, body, anthropicRequest)
}

// Event implements Dialect. The event's kind is the JSON "type", which
// Anthropic always repeats, else the SSE event name; an `event: error` is a
// failure whatever its payload says, as in Anthropic's SDKs. Members are
// read raw (see jsonraw.go) because text deltas are full of escapes.
func (a *anthropicMessages) Event(o *Observer, ev *sse.Event) {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 || data[0] != '{' {
		o.Degrade("event_not_json")
		return
	}
	var typ, message, delta, usage, errObj, block, index string
	rawMembers(view(data), func(k, v string) bool {
		switch k {
		case "type":
			typ = v
		case "index":
			index = v
		case "message":
			message = v
		case "delta":
			delta = v
		case "usage":
			usage = v
		case "error":
			errObj = v
		case "content_block":
			block = v
		}
		return true
	})
	kind, ok := rawText(typ)
	if !ok {
		kind = view(ev.Type)
	}
	if string(ev.Type) == "error" {
		kind = "error"
	}
	switch kind {
	case "content_block_delta":
		anthropicDelta(o, delta, index)
	case "content_block_start":
		// Blocks start empty; a text or thinking block that arrives with
		// its text already in it (some compatible servers) is output. A
		// tool_use or server_tool_use block starts with the tool's name,
		// generated output and so the call's first token, and
		// "input":{}, which is not generated yet: its arguments follow as
		// input_json_delta.
		anthropicDelta(o, block, index)
	case "message_start":
		// Its usage.output_tokens is a placeholder (1 to 5) that the
		// message_delta replaces; a truncated stream is better served by
		// the estimate.
		a.readMessage(o, message, false)
	case "message_delta":
		rawMembers(delta, func(k, v string) bool {
			if k == "stop_reason" {
				var b rawBuf
				if r, ok := rawStr(v, b[:0]); ok {
					o.FinishReason(0, r)
				}
				return false
			}
			return true
		})
		a.readUsage(o, usage, true)
	case "message_stop":
		o.Done()
	case "error":
		var b rawBuf
		o.Error(anthropicErrorType(errObj, b[:0]))
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
	visible := false
	kind := TextAnswer
	switch typ {
	case `"text_delta"`, `"text"`:
		out, visible = text, true
	case `"thinking_delta"`, `"thinking"`:
		out, kind = thinking, TextReasoning
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

// readMessage reads a Message object: message_start's, or a whole
// non-streamed body's. When whole it returns the estimated tokens of its
// content, for servers that report no usage.
func (a *anthropicMessages) readMessage(o *Observer, msg string, whole bool) (tokens int64) {
	rawMembers(msg, func(k, v string) bool {
		var b rawBuf
		switch k {
		case "id":
			if s, ok := rawStr(v, b[:0]); ok {
				o.ResponseID(s)
			}
		case "model":
			if s, ok := rawStr(v, b[:0]); ok {
				o.Model(s)
			}
		case "stop_reason":
			if s, ok := rawStr(v, b[:0]); ok {
				o.FinishReason(0, s)
			}
		case "usage":
			a.readUsage(o, v, whole)
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

// readUsage merges a usage object. Every field is cumulative, so each takes
// its latest value. withOutput is false for message_start, whose output
// count is a placeholder.
func (a *anthropicMessages) readUsage(o *Observer, u string, withOutput bool) {
	names := anthropicUsage
	if !withOutput {
		names.output = ""
	}
	a.usage.read(o, u, names)
}

// Body implements Dialect: a whole Message, or an error object.
func (a *anthropicMessages) Body(o *Observer, body []byte) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		o.Degrade("body_not_json")
		return
	}
	var typ, errObj string
	rawMembers(view(body), func(k, v string) bool {
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
	if n := a.readMessage(o, view(body), true); n > 0 {
		o.Output(n, true)
	}
}

// anthropicErrorType is the error object's type, e.g. "overloaded_error",
// decoded into buf if it has escapes.
func anthropicErrorType(e string, buf []byte) []byte {
	typ, _ := rawStr(rawMember(e, "type"), buf)
	return typ
}

// estimateText is EstimateTokens made safe for bytes it does not expect. A
// raw control character or DEL is invalid inside a JSON string but can come
// from a broken or hostile upstream, and EstimateTokens's loop does not move
// past one; so each such byte counts as one token and the runs between them
// are estimated as usual. It costs one extra pass over the text.
func estimateText(s []byte) int64 {
	var n int64
	start := 0
	for i, c := range s {
		if c < ' ' || c == 0x7f {
			n += EstimateTokens(s[start:i]) + 1
			start = i + 1
		}
	}
	return n + EstimateTokens(s[start:])
}
