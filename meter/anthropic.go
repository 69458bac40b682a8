package meter

import (
	"bytes"

	"github.com/tidwall/gjson"

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
	input, cacheRead, cacheCreation int64
}

func newAnthropicMessages() *anthropicMessages {
	return &anthropicMessages{input: -1, cacheRead: -1, cacheCreation: -1}
}

// Name implements Dialect.
func (*anthropicMessages) Name() string { return anthropicMessagesInfo.Name }

// Operation implements Dialect: the Messages API only chats.
func (*anthropicMessages) Operation(string) string { return "chat" }

// Request implements Dialect.
func (*anthropicMessages) Request(r *Request, _ string, body []byte) {
	if v := gjson.GetBytes(body, "model"); v.Type == gjson.String {
		r.Model = v.Str
	}
	if v := gjson.GetBytes(body, "stream"); v.IsBool() {
		r.Stream, r.HasStream = v.Bool(), true
	}
	if v := gjson.GetBytes(body, "max_tokens"); v.Type == gjson.Number {
		r.MaxTokens, r.HasMaxTokens = v.Int(), true
	}
	if v := gjson.GetBytes(body, "temperature"); v.Type == gjson.Number {
		r.Temperature, r.HasTemperature = v.Float(), true
	}
	if v := gjson.GetBytes(body, "top_p"); v.Type == gjson.Number {
		r.TopP, r.HasTopP = v.Float(), true
	}
}

// Event implements Dialect. The event's kind is the JSON "type", which
// Anthropic always repeats, else the SSE event name; an `event: error` is a
// failure whatever its payload says, as in Anthropic's SDKs. Members are
// read raw (see rawMembers) because text deltas are full of escapes.
func (a *anthropicMessages) Event(o *Observer, ev *sse.Event) {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 || data[0] != '{' {
		o.Degrade("event_not_json")
		return
	}
	var typ, message, delta, usage, errObj, block string
	rawMembers(view(data), func(k, v string) bool {
		switch k {
		case "type":
			typ = v
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
		anthropicDelta(o, delta)
	case "content_block_start":
		// Blocks start empty; a text or thinking block that arrives with
		// its text already in it (some compatible servers) is output.
		// tool_use starts with "input":{}, which is not generated yet: its
		// arguments follow as input_json_delta.
		anthropicDelta(o, block)
	case "message_start":
		// Its usage.output_tokens is a placeholder (1 to 5) that the
		// message_delta replaces; a truncated stream is better served by
		// the estimate.
		a.readMessage(o, message, false)
	case "message_delta":
		rawMembers(delta, func(k, v string) bool {
			if k == "stop_reason" {
				if r, ok := rawStr(v); ok {
					o.FinishReason(0, bytesOf(r))
				}
				return false
			}
			return true
		})
		a.readUsage(o, usage, true)
	case "message_stop":
		o.Done()
	case "error":
		o.Error(anthropicErrorType(errObj))
	}
	// ping, content_block_stop and unknown types ("new event types may be
	// added") are chunks, not tokens.
}

// anthropicDelta reads a content_block_delta's delta, or a content block:
// text is visible; thinking and tool input are output but not visible.
// signature_delta (the end of a thinking block), citations_delta (cited
// text is not generated, nor billed as output) and redacted_thinking (an
// encrypted blob) carry no countable text.
func anthropicDelta(o *Observer, d string) {
	var typ, text, thinking, partial string
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
		}
		return true
	})
	var out string
	visible := false
	switch typ {
	case `"text_delta"`, `"text"`:
		out, visible = text, true
	case `"thinking_delta"`, `"thinking"`:
		out = thinking
	case `"input_json_delta"`:
		// The first one of every tool_use block is "" and is not a token.
		out = partial
	default:
		return
	}
	if s, ok := rawText(out); ok && s != "" {
		o.Output(estimateText(bytesOf(s)), visible)
	}
}

// readMessage reads a Message object: message_start's, or a whole
// non-streamed body's. When whole it returns the estimated tokens of its
// content, for servers that report no usage.
func (a *anthropicMessages) readMessage(o *Observer, msg string, whole bool) (tokens int64) {
	rawMembers(msg, func(k, v string) bool {
		switch k {
		case "id":
			if s, ok := rawStr(v); ok {
				o.ResponseID(bytesOf(s))
			}
		case "model":
			if s, ok := rawStr(v); ok {
				o.Model(bytesOf(s))
			}
		case "stop_reason":
			if s, ok := rawStr(v); ok {
				o.FinishReason(0, bytesOf(s))
			}
		case "usage":
			a.readUsage(o, v, whole)
		case "content":
			if whole {
				tokens = anthropicContentTokens(v)
			}
		}
		return true
	})
	return tokens
}

// anthropicContentTokens estimates a whole message's generated content:
// text, thinking and tool input (read as raw JSON, close to how its
// streamed partial_json would count).
func anthropicContentTokens(content string) (tokens int64) {
	rawElements(content, func(b string) bool {
		var typ, input string
		rawMembers(b, func(k, v string) bool {
			switch k {
			case "type":
				typ = v
			case "text", "thinking":
				if s, ok := rawText(v); ok {
					tokens += estimateText(bytesOf(s))
				}
			case "input":
				input = v
			}
			return true
		})
		if typ == `"tool_use"` && len(input) > 0 && input[0] == '{' {
			tokens += estimateText(bytesOf(input))
		}
		return true
	})
	return tokens
}

// readUsage merges a usage object. Every field is cumulative, so each takes
// its latest value; input is the sum of the three input parts, as semconv
// requires. withOutput is false for message_start, whose output count is a
// placeholder.
func (a *anthropicMessages) readUsage(o *Observer, u string, withOutput bool) {
	out := unknownUsage
	found := false
	rawMembers(u, func(k, v string) bool {
		n, ok := rawCount(v)
		if !ok {
			return true
		}
		switch k {
		case "input_tokens":
			a.input, found = n, true
		case "cache_read_input_tokens":
			a.cacheRead, found = n, true
		case "cache_creation_input_tokens":
			a.cacheCreation, found = n, true
		case "output_tokens":
			if withOutput {
				out.OutputTokens, found = n, true
			}
		}
		return true
	})
	if !found {
		return
	}
	if a.input >= 0 {
		out.InputTokens = a.input + max(a.cacheRead, 0) + max(a.cacheCreation, 0)
	}
	out.CacheReadInputTokens = a.cacheRead
	out.CacheCreationInputTokens = a.cacheCreation
	o.Usage(out)
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
		o.Error(anthropicErrorType(errObj))
		return
	}
	if n := a.readMessage(o, view(body), true); n > 0 {
		o.Output(n, true)
	}
}

// anthropicErrorType is the error object's type, e.g. "overloaded_error".
func anthropicErrorType(e string) []byte {
	var typ []byte
	rawMembers(e, func(k, v string) bool {
		if k == "type" {
			if s, ok := rawStr(v); ok {
				typ = bytesOf(s)
			}
			return false
		}
		return true
	})
	return typ
}

// rawMembers calls fn with the key and raw value of each member of the JSON
// object obj, stopping when fn returns false or the object is malformed.
// Unlike gjson's ForEach it never decodes a string, which would allocate for
// every text delta with a newline or a quote in it; keys are compared as
// written, and the keys dialects look for have no escapes.
func rawMembers(obj string, fn func(key, val string) bool) {
	i := skipJSONSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = skipJSONSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return
		}
		end := skipJSONString(obj, i)
		if end < 0 {
			return
		}
		key := obj[i+1 : end-1]
		i = skipJSONSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = skipJSONSpace(obj, i+1)
		end = skipJSONValue(obj, i)
		if end < 0 {
			return
		}
		if !fn(key, obj[i:end]) {
			return
		}
		i = skipJSONSpace(obj, end)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i++
	}
}

// rawElements calls fn with each raw element of the JSON array arr.
func rawElements(arr string, fn func(val string) bool) {
	i := skipJSONSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return
	}
	i++
	for {
		i = skipJSONSpace(arr, i)
		end := skipJSONValue(arr, i)
		if end < 0 {
			return
		}
		if !fn(arr[i:end]) {
			return
		}
		i = skipJSONSpace(arr, end)
		if i >= len(arr) || arr[i] != ',' {
			return
		}
		i++
	}
}

func skipJSONSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// skipJSONString returns the index just past the string that starts with
// the quote at s[i], or -1 when it is not closed.
func skipJSONString(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipJSONValue returns the index just past the value that starts at s[i],
// or -1 when there is none or it is cut short. Brackets are only counted,
// not matched: a lenient reader, as gjson is.
func skipJSONValue(s string, i int) int {
	if i >= len(s) {
		return -1
	}
	switch s[i] {
	case '"':
		return skipJSONString(s, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				e := skipJSONString(s, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	case ',', '}', ']', ':':
		return -1
	}
	j := i
	for j < len(s) && s[j] != ',' && s[j] != '}' && s[j] != ']' && s[j] > ' ' {
		j++
	}
	return j
}

// rawText is the inside of a raw JSON string, escapes kept: what
// EstimateTokens reads. ok is false when raw is not a string.
func rawText(raw string) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	return raw[1 : len(raw)-1], true
}

// rawStr decodes a raw JSON string; only one with escapes allocates.
func rawStr(raw string) (string, bool) {
	s, ok := rawText(raw)
	if !ok {
		return "", false
	}
	if bytes.IndexByte(bytesOf(s), '\\') >= 0 {
		return gjson.Parse(raw).Str, true
	}
	return s, true
}

// rawCount reads a raw JSON number as a token count; negative or
// non-numeric values are not counts.
func rawCount(raw string) (int64, bool) {
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' {
		return 0, false
	}
	r := gjson.Parse(raw)
	if r.Type != gjson.Number {
		return 0, false
	}
	return r.Int(), true
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
