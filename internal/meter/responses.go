package meter

import (
	"bytes"

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
	readRequest(r, body, openAIResponsesRequest)
	readServiceTier(r, body)
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
	var typ, delta, resp, errObj, code, index, item string
	rawMembers(view(data), func(k, v string) bool {
		switch k {
		case "type":
			typ = v
		case "delta":
			delta = v
		case "output_index":
			index = v
		case "item":
			item = v
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
		responsesOutput(o, delta, true, TextAnswer, index)
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		// Reasoning and tool input are generated tokens, not answer text.
		responsesOutput(o, delta, false, TextReasoning, index)
	case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta",
		"response.mcp_call_arguments.delta", "response.code_interpreter_call_code.delta":
		responsesOutput(o, delta, false, TextToolCallArguments, index)
	case "response.output_item.added":
		// A tool call is added with its name, which the model generated:
		// its first token, before its arguments.
		if n := responsesCallTokens(item); n > 0 {
			o.Output(n, false)
		}
		if o.capturing() {
			emitResponsesToolCall(o, int(rawLooseInt(index)), item)
		}
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
	// keepalive, output_item.done, other output_item.added items,
	// content_part.*, *.done, annotations and unknown types are chunks,
	// not tokens.
}

// responsesOutput reports a delta event's text; an empty delta is not a
// token. kind and index (the output item's) are for a text sink.
func responsesOutput(o *Observer, delta string, visible bool, kind TextKind, index string) {
	if s, ok := rawText(delta); ok && s != "" {
		if kind == TextReasoning {
			o.Reasoning()
		}
		o.Output(estimateText(bytesOf(s)), visible)
		if o.capturing() {
			o.emit(int(rawLooseInt(index)), kind, delta)
		}
	}
}

// responsesCallTokens estimates what the model generated in a tool call
// output item as it is added, 0 for none: a function or custom tool call's
// name (its arguments stream after it); an MCP call's name when the model
// named it in this response ("approval_request_id" null: one that runs
// after an approval was named in the earlier response that asked for it);
// an MCP approval request's name and arguments, which arrive whole in it.
func responsesCallTokens(item string) int64 {
	var typ, name, args, approval string
	rawMembers(item, func(k, v string) bool {
		switch k {
		case "type":
			typ = v
		case "name":
			name = v
		case "arguments":
			args = v
		case "approval_request_id":
			approval = v
		}
		return true
	})
	var n int64
	switch typ {
	case `"mcp_approval_request"`:
		if s, ok := rawText(args); ok && s != "" {
			n = estimateText(bytesOf(s))
		}
	case `"mcp_call"`:
		if approval != "" && approval != "null" {
			return 0
		}
	case `"function_call"`, `"custom_tool_call"`:
	default:
		return 0
	}
	if s, ok := rawText(name); ok && s != "" {
		n += estimateText(bytesOf(s))
	}
	return n
}

// emitResponsesToolCall hands a text sink the id and name of a tool call
// output item when it is added, before its arguments stream: a function or
// custom tool call's call_id and name, an MCP call's id and name, or a
// code interpreter call's id with its type for a name.
func emitResponsesToolCall(o *Observer, index int, item string) {
	var typ, id, callID, name string
	rawMembers(item, func(k, v string) bool {
		switch k {
		case "type":
			typ = v
		case "id":
			id = v
		case "call_id":
			callID = v
		case "name":
			name = v
		}
		return true
	})
	switch typ {
	case `"function_call"`, `"custom_tool_call"`, `"mcp_call"`, `"code_interpreter_call"`:
	default:
		return
	}
	if rawNonEmptyString(callID) {
		id = callID
	}
	if !rawNonEmptyString(name) {
		name = typ
	}
	if rawNonEmptyString(id) {
		o.emit(index, TextToolCallID, id)
	}
	o.emit(index, TextToolCallName, name)
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
	if n := responsesOutputTokens(o, output); n > 0 {
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
		switch k {
		case "id", "model", "service_tier":
			o.identity(k, v)
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
// already includes the tokens read from the prompt cache and those written
// to it, as the recordings of OpenAI and Bedrock's endpoint show
// (docs/telemetry.md), and output_tokens reasoning tokens, as semconv
// wants.
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
			out.CacheCreationInputTokens = rawMemberCount(v, "cache_write_tokens")
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
// and tool-call input; and hands them to a text sink, each item's by its
// place in output.
func responsesOutputTokens(o *Observer, output string) (tokens int64) {
	index := 0
	text := func(v string, kind TextKind) {
		if s, ok := rawText(v); ok {
			tokens += estimateText(bytesOf(s))
			o.emit(index, kind, v)
		}
	}
	rawElements(output, func(item string) bool {
		kind := TextAnswer
		if o.capturing() {
			emitResponsesToolCall(o, index, item)
			if rawMember(item, "type") == `"reasoning"` {
				kind = TextReasoning
			}
		}
		rawMembers(item, func(k, v string) bool {
			switch k {
			case "content", "summary":
				rawElements(v, func(part string) bool {
					rawMembers(part, func(k, v string) bool {
						if k == "text" || k == "refusal" {
							text(v, kind)
						}
						return true
					})
					return true
				})
			case "arguments", "input", "code":
				text(v, TextToolCallArguments)
			}
			return true
		})
		index++
		return true
	})
	return tokens
}
