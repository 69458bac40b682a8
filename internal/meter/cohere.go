package meter

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/tokentap/tokentap/sse"
)

// cohereChatInfo registers Cohere's v2 Chat API. Its OpenAI-compatible
// endpoint (/compatibility/v1/chat/completions) is read by openai_chat.
var cohereChatInfo = DialectInfo{
	Name:     "cohere_chat",
	New:      func() Dialect { return cohereChat{} },
	Provider: "cohere",
	Matches:  func(path string) bool { return hasPathSuffix(path, "/v2/chat") },
}

func init() { RegisterDialect(cohereChatInfo) }

// cohereChat is stateless: each event names its own type, and message-end
// carries everything counted.
type cohereChat struct{}

func (cohereChat) Name() string { return cohereChatInfo.Name }

func (cohereChat) Operation(string) string { return "chat" }

// Request reads Cohere's parameters; its nucleus-sampling parameter is p,
// not top_p.
func (cohereChat) Request(r *Request, _ string, body []byte) {
	readRequest(r, body, cohereRequest)
	readSampling(r, gjson.ParseBytes(body), cohereSampling)
}

// Event reads one event with the raw reader of jsonraw.go: text deltas and
// tool-call arguments are full of escapes, which a decoding reader
// allocates for.
func (cohereChat) Event(o *Observer, ev *sse.Event) {
	data := bytes.TrimSpace(ev.Data)
	// A [DONE] that gateways append after message-end never gets here
	// (Meter.onEvent): message-end alone ends the stream.
	if len(data) == 0 || data[0] != '{' {
		o.Degrade("event_not_json")
		return
	}
	var typ, id, delta, index string
	rawMembers(view(data), func(k, v string) bool {
		switch k {
		case "type":
			typ = v
		case "id":
			id = v
		case "delta":
			delta = v
		case "index":
			index = v
		}
		return true
	})
	t, ok := rawText(typ)
	if !ok {
		// The JSON names its type on every documented event; the SSE
		// event field is the same name, kept as a fallback.
		t = view(ev.Type)
	}
	var b rawBuf
	if id, ok := rawStr(id, b[:0]); ok {
		o.ResponseID(id)
	}
	message := rawMember(delta, "message")
	switch t {
	case "content-start", "content-delta":
		// content-start normally opens a block with empty text; if it
		// ever carries text, that text is output too.
		c := rawMember(message, "content")
		text := rawMember(c, "text")
		if n := cohereTextTokens(text); n > 0 {
			o.Output(n, true)
			o.emit(0, TextAnswer, text)
		} else {
			thinking := rawMember(c, "thinking")
			if n := cohereTextTokens(thinking); n > 0 {
				o.Reasoning()
				o.Output(n, false)
				o.emit(0, TextReasoning, thinking)
			}
		}
	case "tool-plan-delta":
		// The plan a model writes before calling tools is generated text
		// the client does not show as the answer.
		plan := rawMember(message, "tool_plan")
		if n := cohereTextTokens(plan); n > 0 {
			o.Output(n, false)
			o.emit(0, TextReasoning, plan)
		}
	case "tool-call-start", "tool-call-delta":
		call := rawMember(message, "tool_calls")
		fn := rawMember(call, "function")
		item := 0
		if o.capturing() {
			item = int(rawLooseInt(index))
			if id := rawMember(call, "id"); rawNonEmptyString(id) {
				o.emit(item, TextToolCallID, id)
			}
			if name := rawMember(fn, "name"); rawNonEmptyString(name) {
				o.emit(item, TextToolCallName, name)
			}
		}
		// tool-call-start names the call ("arguments" still ""): the
		// name is generated output and the call's first token, as an
		// OpenAI call's naming delta is.
		args := rawMember(fn, "arguments")
		argTokens := cohereTextTokens(args)
		n := argTokens
		if t == "tool-call-start" {
			n += cohereTextTokens(rawMember(fn, "name"))
		}
		if n > 0 {
			o.Output(n, false)
		}
		if argTokens > 0 {
			o.emit(item, TextToolCallArguments, args)
		}
	case "message-end":
		readCohereEnd(o, delta)
		o.Done()
	}
}

// readCohereEnd reads message-end's delta, which has the same shape as the
// finish_reason and usage of a whole response.
func readCohereEnd(o *Observer, d string) {
	var failed, message bool
	rawMembers(d, func(k, v string) bool {
		switch k {
		case "finish_reason":
			failed = readCohereFinish(o, v)
		case "usage":
			readCohereUsage(o, v)
		case "error":
			t, ok := rawText(v)
			message = ok && t != ""
		}
		return true
	})
	// The error message is free text; the finish reason, when it says
	// ERROR, is the better type, whichever key comes first.
	if message && !failed {
		o.Error(nil)
	}
}

// readCohereFinish records the finish reason, a raw JSON value, and
// reports whether it says generation failed: ERROR (and v1's ERROR_TOXIC,
// ERROR_LIMIT) and TIMEOUT do, and the reason is then the low-cardinality
// name of the failure.
func readCohereFinish(o *Observer, v string) (failed bool) {
	var b rawBuf
	r, ok := rawStr(v, b[:0])
	if !ok || len(r) == 0 {
		return false
	}
	o.FinishReason(0, r)
	if bytes.HasPrefix(r, []byte("ERROR")) || string(r) == "TIMEOUT" {
		o.Error(r)
		return true
	}
	return false
}

// readCohereUsage reports usage.tokens, what the model actually processed,
// as Usage, as every provider's gen_ai.usage.* are: tokens.input_tokens
// already includes cached_tokens. billed_units, which leave out the system
// preamble and cached input and can be far smaller (12 against 507 on a
// recorded stream), are what Cohere bills, so they are reported apart, as
// BilledUsage, and the cost is priced from them.
func readCohereUsage(o *Observer, u string) {
	out, billed := unknownUsage, unknownBilled
	rawMembers(u, func(k, v string) bool {
		switch k {
		case "tokens":
			if n, ok := rawInt(rawMember(v, "input_tokens")); ok {
				out.InputTokens = n
			}
			if n, ok := rawInt(rawMember(v, "output_tokens")); ok {
				out.OutputTokens = n
			}
		case "billed_units":
			// Cohere's reference types these as doubles: 12.0 reads
			// as 12; a negative or non-numeric one is not a count.
			if n, ok := rawCount(rawMember(v, "input_tokens")); ok {
				billed.InputTokens = n
			}
			if n, ok := rawCount(rawMember(v, "output_tokens")); ok {
				billed.OutputTokens = n
			}
		case "cached_tokens":
			if n, ok := rawInt(v); ok {
				out.CacheReadInputTokens = n
			}
		}
		return true
	})
	if out.InputTokens >= 0 || out.OutputTokens >= 0 {
		o.Usage(out)
	}
	if billed.InputTokens >= 0 || billed.OutputTokens >= 0 {
		o.BilledUsage(billed)
	}
}

// Body reads a non-streamed chat response: {id, finish_reason, message,
// usage}. Error bodies ({id, message} with an error status) give nothing
// but the status, which the Meter already has.
func (cohereChat) Body(o *Observer, body []byte) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		o.Degrade("body_not_json")
		return
	}
	var out eventOutput
	rawMembers(view(body), func(k, v string) bool {
		switch k {
		case "id":
			o.identity(k, v)
		case "finish_reason":
			readCohereFinish(o, v)
		case "usage":
			readCohereUsage(o, v)
		case "message":
			if rawKindOf(v) != kindObject {
				break
			}
			// The plan comes before the answer it leads to.
			plan := rawMember(v, "tool_plan")
			if n := cohereTextTokens(plan); n > 0 {
				out.add(n, false)
				o.emit(0, TextReasoning, plan)
			}
			rawValues(rawMember(v, "content"), func(part string) bool {
				text, thinking := rawMember(part, "text"), rawMember(part, "thinking")
				if n := cohereTextTokens(thinking); n > 0 {
					out.add(n, false)
					o.emit(0, TextReasoning, thinking)
				}
				if n := cohereTextTokens(text); n > 0 {
					out.add(n, true)
					o.emit(0, TextAnswer, text)
				}
				return true
			})
			item := 0
			rawValues(rawMember(v, "tool_calls"), func(call string) bool {
				fn := rawMember(call, "function")
				if o.capturing() {
					if id := rawMember(call, "id"); rawNonEmptyString(id) {
						o.emit(item, TextToolCallID, id)
					}
					if name := rawMember(fn, "name"); rawNonEmptyString(name) {
						o.emit(item, TextToolCallName, name)
					}
				}
				args := rawMember(fn, "arguments")
				if n := cohereTextTokens(args); n > 0 {
					out.add(n, false)
					o.emit(item, TextToolCallArguments, args)
				}
				item++
				return true
			})
		}
		return true
	})
	out.report(o)
}

// cohereTextTokens estimates a raw JSON string's tokens; anything else, and
// the empty strings that open content blocks and tool calls, is none.
func cohereTextTokens(v string) int64 {
	if t, ok := rawText(v); ok && t != "" {
		return max(EstimateTokens(bytesOf(t)), 1)
	}
	return 0
}
