package meter

import (
	"bytes"
	"strings"

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
	if v := gjson.GetBytes(body, "p"); v.Type == gjson.Number {
		r.TopP, r.HasTopP = v.Float(), true
	}
}

func (cohereChat) Event(o *Observer, ev *sse.Event) {
	data := bytes.TrimSpace(ev.Data)
	if bytes.Equal(data, doneMarker) {
		// Some gateways append OpenAI's terminator after message-end.
		// Only message-end carries the counts, so it alone ends the
		// stream; the marker is neither an end nor a fault.
		return
	}
	if len(data) == 0 || data[0] != '{' {
		o.Degrade("event_not_json")
		return
	}
	var typ, id, delta gjson.Result
	gjson.Parse(view(data)).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "type":
			typ = v
		case "id":
			id = v
		case "delta":
			delta = v
		}
		return true
	})
	t := typ.Str
	if typ.Type != gjson.String {
		// The JSON names its type on every documented event; the SSE
		// event field is the same name, kept as a fallback.
		t = view(ev.Type)
	}
	if id.Type == gjson.String {
		o.ResponseID(bytesOf(id.Str))
	}
	switch t {
	case "content-start", "content-delta":
		// content-start normally opens a block with empty text; if it
		// ever carries text, that text is output too.
		c := delta.Get("message.content")
		if n := cohereTextTokens(c.Get("text")); n > 0 {
			o.Output(n, true)
		} else if n := cohereTextTokens(c.Get("thinking")); n > 0 {
			o.Output(n, false)
		}
	case "tool-plan-delta":
		// The plan a model writes before calling tools is generated text
		// the client does not show as the answer.
		if n := cohereTextTokens(delta.Get("message.tool_plan")); n > 0 {
			o.Output(n, false)
		}
	case "tool-call-start", "tool-call-delta":
		if n := cohereTextTokens(delta.Get("message.tool_calls.function.arguments")); n > 0 {
			o.Output(n, false)
		}
	case "message-end":
		readCohereEnd(o, delta)
		o.Done()
	}
}

// readCohereEnd reads message-end's delta, which has the same shape as the
// finish_reason and usage of a whole response.
func readCohereEnd(o *Observer, d gjson.Result) {
	var failed, message bool
	d.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "finish_reason":
			failed = readCohereFinish(o, v)
		case "usage":
			readCohereUsage(o, v)
		case "error":
			message = v.Type == gjson.String && v.Str != ""
		}
		return true
	})
	// The error message is free text; the finish reason, when it says
	// ERROR, is the better type, whichever key comes first.
	if message && !failed {
		o.Error(nil)
	}
}

// readCohereFinish records the finish reason and reports whether it says
// generation failed: ERROR (and v1's ERROR_TOXIC, ERROR_LIMIT) and TIMEOUT
// do, and the reason is then the low-cardinality name of the failure.
func readCohereFinish(o *Observer, v gjson.Result) (failed bool) {
	if v.Type != gjson.String || v.Str == "" {
		return false
	}
	o.FinishReason(0, bytesOf(v.Str))
	if strings.HasPrefix(v.Str, "ERROR") || v.Str == "TIMEOUT" {
		o.Error(bytesOf(v.Str))
		return true
	}
	return false
}

// readCohereUsage reports usage.tokens, what the model actually processed,
// not billed_units, which leaves out the system preamble and cached input
// and can be far smaller. tokens.input_tokens already includes
// cached_tokens.
func readCohereUsage(o *Observer, u gjson.Result) {
	out := unknownUsage
	u.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "tokens":
			if t := v.Get("input_tokens"); t.Type == gjson.Number {
				out.InputTokens = t.Int()
			}
			if t := v.Get("output_tokens"); t.Type == gjson.Number {
				out.OutputTokens = t.Int()
			}
		case "cached_tokens":
			if v.Type == gjson.Number {
				out.CacheReadInputTokens = v.Int()
			}
		}
		return true
	})
	if out.InputTokens >= 0 || out.OutputTokens >= 0 {
		o.Usage(out)
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
	var tokens int64
	var output, visible bool
	gjson.Parse(view(body)).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "id":
			if v.Type == gjson.String {
				o.ResponseID(bytesOf(v.Str))
			}
		case "finish_reason":
			readCohereFinish(o, v)
		case "usage":
			readCohereUsage(o, v)
		case "message":
			if !v.IsObject() {
				break
			}
			v.Get("content").ForEach(func(_, part gjson.Result) bool {
				if n := cohereTextTokens(part.Get("text")); n > 0 {
					tokens, output, visible = tokens+n, true, true
				}
				if n := cohereTextTokens(part.Get("thinking")); n > 0 {
					tokens, output = tokens+n, true
				}
				return true
			})
			if n := cohereTextTokens(v.Get("tool_plan")); n > 0 {
				tokens, output = tokens+n, true
			}
			v.Get("tool_calls").ForEach(func(_, call gjson.Result) bool {
				if n := cohereTextTokens(call.Get("function.arguments")); n > 0 {
					tokens, output = tokens+n, true
				}
				return true
			})
		}
		return true
	})
	if output {
		o.Output(tokens, visible)
	}
}

// cohereTextTokens estimates a JSON string's tokens; anything else, and
// the empty strings that open content blocks and tool calls, is none.
func cohereTextTokens(v gjson.Result) int64 {
	if v.Type != gjson.String || v.Raw == `""` {
		return 0
	}
	return max(EstimateTokens(rawString(v)), 1)
}
