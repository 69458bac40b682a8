package capture

import (
	"github.com/tidwall/gjson"
)

// Input reads a request body in the API format dialect names (the meter's
// dialect names) and returns gen_ai.system_instructions, for the APIs that
// give instructions apart from the messages (Anthropic's system, Gemini's
// systemInstruction, the Responses API's instructions, Bedrock's system,
// Ollama generate's system), and gen_ai.input.messages. Each is at most
// max bytes of JSON (DefaultMaxSize if max <= 0), and empty when the body
// has none. An unknown dialect, or a body that is not JSON, gives nothing.
//
// body may be the first part of a longer body (the proxy copies requests
// up to a cap): what it holds whole is read, and the caller says the rest
// is missing by marking the results truncated.
func Input(dialect string, body []byte, max int) (system, input Result) {
	if max <= 0 {
		max = DefaultMaxSize
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return Result{}, Result{}
	}
	var sys []part
	var msgs []message
	switch dialect {
	case "openai_chat":
		msgs = openAIChatInput(root)
	case "openai_responses":
		sys, msgs = responsesInput(root)
	case "anthropic_messages":
		sys, msgs = anthropicInput(root)
	case "gemini":
		sys, msgs = geminiInput(root)
	case "ollama":
		sys, msgs = ollamaInput(root)
	case "cohere_chat":
		msgs = cohereInput(root)
	case "tgi":
		msgs = promptInput(root.Get("inputs"))
	case "bedrock_converse":
		sys, msgs = bedrockConverseInput(root)
	case "bedrock_invoke":
		sys, msgs = bedrockInvokeInput(root)
	default:
		return Result{}, Result{}
	}
	if len(sys) > 0 {
		system = encodeParts(sys, max)
	}
	if len(msgs) > 0 {
		input = encodeMessages(msgs, max)
	}
	return system, input
}

// promptInput is a completion API's prompt as one user message: a string,
// or a list of strings (several prompts in one request, read as one).
func promptInput(p gjson.Result) []message {
	var parts []part
	switch {
	case p.Type == gjson.String:
		parts = textPart(typeText, p.Str)
	case p.IsArray():
		p.ForEach(func(_, v gjson.Result) bool {
			if v.Type == gjson.String {
				parts = append(parts, textPart(typeText, v.Str)...)
			}
			return true
		})
	}
	if len(parts) == 0 {
		return nil
	}
	return []message{{Role: "user", Parts: parts}}
}

// eachWhole calls fn with each element of the array arr that is whole
// JSON. A body cut off by the proxy's copy cap ends inside its last
// message, which gjson still hands out, half; a half message is left out
// rather than recorded as if it were all the client sent.
func eachWhole(arr gjson.Result, fn func(v gjson.Result)) {
	arr.ForEach(func(_, v gjson.Result) bool {
		if gjson.Valid(v.Raw) {
			fn(v)
		}
		return true
	})
}

// first returns the first of the named members of obj that exists: APIs
// that accept both camelCase and snake_case (Gemini) have two names for a
// field.
func first(obj gjson.Result, names ...string) gjson.Result {
	for _, n := range names {
		if v := obj.Get(n); v.Exists() {
			return v
		}
	}
	return gjson.Result{}
}

// jsonText is a value that holds JSON or text as the bytes to keep: a
// string's contents, or any other value as written.
func jsonText(v gjson.Result) []byte {
	if v.Type == gjson.String {
		return []byte(v.Str)
	}
	return []byte(v.Raw)
}

// str is a string member, capped as a name-like field.
func str(v gjson.Result) string {
	if v.Type != gjson.String {
		return ""
	}
	var cut bool
	return small(v.Str, &cut)
}
