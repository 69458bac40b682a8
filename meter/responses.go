package meter

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/tokentap/tokentap/sse"
)

// openAIResponsesInfo registers OpenAI's Responses API, also served by Azure
// OpenAI (/openai/v1/responses) and by vLLM and other compatible servers.
// Retrieving a stored response (/v1/responses/{id}) is not a generation and
// does not match.
var openAIResponsesInfo = DialectInfo{
	Name:     "openai_responses",
	New:      func() Dialect { return openAIResponses{} },
	Provider: "openai",
	Matches:  func(path string) bool { return hasPathSuffix(path, "/responses") },
}

func init() {
	RegisterDialect(openAIResponsesInfo)
	// The finish reasons and error codes this dialect reports on most
	// exchanges, so that recording them does not allocate.
	for _, s := range []string{
		"max_output_tokens", "failed", "cancelled", "incomplete", "rate_limit_exceeded",
		"model_not_found", "context_length_exceeded", "invalid_prompt",
	} {
		interned[s] = s
	}
}

// openAIResponses is stateless: everything it learns goes to the Observer.
type openAIResponses struct{}

// Name implements Dialect.
func (openAIResponses) Name() string { return openAIResponsesInfo.Name }

// Operation implements Dialect.
func (openAIResponses) Operation(string) string { return "chat" }

// Request implements Dialect.
func (openAIResponses) Request(r *Request, _ string, body []byte) {
	if v := gjson.GetBytes(body, "model"); v.Type == gjson.String {
		r.Model = v.Str
	}
	if v := gjson.GetBytes(body, "stream"); v.IsBool() {
		r.Stream, r.HasStream = v.Bool(), true
	}
	if v := gjson.GetBytes(body, "max_output_tokens"); v.Type == gjson.Number {
		r.MaxTokens, r.HasMaxTokens = v.Int(), true
	}
	if v := gjson.GetBytes(body, "temperature"); v.Type == gjson.Number {
		r.Temperature, r.HasTemperature = v.Float(), true
	}
	if v := gjson.GetBytes(body, "top_p"); v.Type == gjson.Number {
		r.TopP, r.HasTopP = v.Float(), true
	}
}

// Event implements Dialect. The kind is the JSON "type", which every
// Responses event carries, else the SSE event name; an `event: error` is a
// failure whatever its payload says, as in openai-python. Members are read
// raw (see jsonraw.go) because deltas and echoed instructions are full of
// escapes.
func (openAIResponses) Event(o *Observer, ev *sse.Event) {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 || data[0] != '{' {
		o.Degrade("event_not_json")
		return
	}
	var typ, delta, resp, errObj, code string
	rawMembers(view(data), func(k, v string) bool {
		switch k {
		case "type":
			typ = v
		case "delta":
			delta = v
		case "response":
			resp = v
		case "error":
			errObj = v
		case "code":
			code = v
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
	case "response.output_text.delta", "response.refusal.delta":
		responsesOutput(o, delta, true)
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta",
		"response.function_call_arguments.delta", "response.custom_tool_call_input.delta",
		"response.mcp_call_arguments.delta", "response.code_interpreter_call_code.delta":
		// Reasoning and tool input are generated tokens, not answer text.
		responsesOutput(o, delta, false)
	case "response.created", "response.in_progress", "response.queued":
		// Model and id arrive here first, so a truncated stream has them.
		readResponsesObject(o, resp, false)
	case "response.completed", "response.incomplete", "response.failed":
		readResponsesObject(o, resp, true)
		o.Done()
	case "error":
		// Observed: {"type":"error","error":{"type":...,"code":...}};
		// documented: {"type":"error","code":...,"message":...}.
		var b rawBuf
		if len(errObj) > 0 && errObj[0] == '{' {
			o.Error(errorType(errObj, b[:0]))
		} else if c, ok := rawStr(code, b[:0]); ok {
			o.Error(c)
		} else {
			o.Error(nil)
		}
	}
	// keepalive, output_item.*, content_part.*, *.done, annotations and
	// unknown types are chunks, not tokens.
}

// responsesOutput reports a delta event's text; an empty delta is not a
// token.
func responsesOutput(o *Observer, delta string, visible bool) {
	if s, ok := rawText(delta); ok && s != "" {
		o.Output(estimateText(bytesOf(s)), visible)
	}
}

// Body implements Dialect: a whole response object, or an error object.
func (openAIResponses) Body(o *Observer, body []byte) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		o.Degrade("body_not_json")
		return
	}
	var status, errObj, output string
	rawMembers(view(body), func(k, v string) bool {
		switch k {
		case "status":
			status = v
		case "error":
			errObj = v
		case "output":
			output = v
		}
		return true
	})
	if status == "" && len(errObj) > 0 && errObj[0] == '{' {
		var b rawBuf
		o.Error(errorType(errObj, b[:0]))
		return
	}
	readResponsesObject(o, view(body), true)
	if n := responsesOutputTokens(output); n > 0 {
		o.Output(n, true)
	}
}

// readResponsesObject reads a response object. When final it also holds the
// outcome: the finish reason and, for a failed response, the error.
//
// The Responses API has no finish reason, only a status. A completed
// response is reported as "stop", semconv's value and what Chat Completions
// says for the same end, so the two OpenAI APIs compare on one dashboard;
// an incomplete one by incomplete_details.reason, the provider's own word
// ("max_output_tokens", "content_filter"); a failed one as "error"; any
// other final status (cancelled) as itself.
func readResponsesObject(o *Observer, r string, final bool) {
	var status, reason, errObj string
	rawMembers(r, func(k, v string) bool {
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
		case "usage":
			if len(v) > 0 && v[0] == '{' {
				o.Usage(readResponsesUsage(v))
			}
		case "status":
			status = v
		case "incomplete_details":
			rawMembers(v, func(k, v string) bool {
				if k == "reason" {
					reason = v
					return false
				}
				return true
			})
		case "error":
			errObj = v
		}
		return true
	})
	var sb, b rawBuf
	st, ok := rawStr(status, sb[:0])
	if !final || !ok {
		return
	}
	switch string(st) {
	case "completed":
		o.FinishReason(0, responsesStop)
	case "incomplete":
		if s, ok := rawStr(reason, b[:0]); ok && len(s) > 0 {
			o.FinishReason(0, s)
		} else {
			o.FinishReason(0, st)
		}
	case "failed":
		o.FinishReason(0, responsesError)
		o.Error(errorType(errObj, b[:0]))
	case "in_progress", "queued":
	default:
		o.FinishReason(0, st)
	}
}

var (
	responsesStop  = []byte("stop")
	responsesError = []byte("error")
)

// readResponsesUsage reads a Responses usage object, whose input_tokens
// already includes cached tokens and output_tokens reasoning tokens, as
// semconv wants. It reports no cache creation.
func readResponsesUsage(u string) Usage {
	out := unknownUsage
	rawMembers(u, func(k, v string) bool {
		switch k {
		case "input_tokens":
			if n, ok := rawCount(v); ok {
				out.InputTokens = n
			}
		case "output_tokens":
			if n, ok := rawCount(v); ok {
				out.OutputTokens = n
			}
		case "input_tokens_details":
			out.CacheReadInputTokens = rawMemberCount(v, "cached_tokens")
		case "output_tokens_details":
			out.ReasoningOutputTokens = rawMemberCount(v, "reasoning_tokens")
		}
		return true
	})
	return out
}

// rawMemberCount is the count in member key of object obj, -1 if none.
func rawMemberCount(obj, key string) int64 {
	if n, ok := rawCount(rawMember(obj, key)); ok {
		return n
	}
	return -1
}

// responsesOutputTokens estimates the generated part of a whole response's
// output items: message text and refusals, reasoning summaries and text,
// and tool-call input.
func responsesOutputTokens(output string) (tokens int64) {
	text := func(v string) {
		if s, ok := rawText(v); ok {
			tokens += estimateText(bytesOf(s))
		}
	}
	rawElements(output, func(item string) bool {
		rawMembers(item, func(k, v string) bool {
			switch k {
			case "content", "summary":
				rawElements(v, func(part string) bool {
					rawMembers(part, func(k, v string) bool {
						if k == "text" || k == "refusal" {
							text(v)
						}
						return true
					})
					return true
				})
			case "arguments", "input", "code":
				text(v)
			}
			return true
		})
		return true
	})
	return tokens
}
