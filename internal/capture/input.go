package capture

import (
	"github.com/tidwall/gjson"
)

// Input reads a request body in the API format dialect names (the meter's
// dialect names) with the reader registered for it (RegisterInput), and
// returns gen_ai.system_instructions, for the APIs that give instructions
// apart from the messages (Anthropic's system, Gemini's
// systemInstruction, the Responses API's instructions, Bedrock's system,
// Ollama generate's system), and gen_ai.input.messages. Each is at most
// max bytes of JSON (DefaultMaxSize if max <= 0), and empty when the body
// has none. A dialect without a reader, or a body that is not JSON, gives
// nothing.
//
// body may be the first part of a longer body (the proxy copies requests
// up to a cap): what it holds whole is read, and the caller says the rest
// is missing by marking the results truncated.
func Input(dialect string, body []byte, max int) (system, input Result) {
	read, ok := inputReaders[dialect]
	if !ok {
		return Result{}, Result{}
	}
	if max <= 0 {
		max = DefaultMaxSize
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return Result{}, Result{}
	}
	sys, msgs := read(root)
	// The built-in readers cap names as they read them; a registered
	// one may not, and a hostile client's names must not crowd the
	// content out.
	var sysCut, msgsCut bool
	capParts(sys, &sysCut)
	for i := range msgs {
		m := &msgs[i]
		m.Role, m.Name = small(m.Role, &msgsCut), small(m.Name, &msgsCut)
		capParts(m.Parts, &msgsCut)
	}
	if len(sys) > 0 {
		system = encodeParts(sys, max)
		system.Truncated = system.Truncated || sysCut
	}
	if len(msgs) > 0 {
		input = encodeMessages(msgs, max)
		input.Truncated = input.Truncated || msgsCut
	}
	return system, input
}

// capParts caps the name-like fields of ps at smallMax.
func capParts(ps []Part, cut *bool) {
	for i := range ps {
		p := &ps[i]
		p.Type, p.ID, p.Name = small(p.Type, cut), small(p.ID, cut), small(p.Name, cut)
		p.Modality, p.MimeType, p.FileID = small(p.Modality, cut), small(p.MimeType, cut), small(p.FileID, cut)
	}
}

// promptInput is a completion API's prompt as one user message: a string,
// or a list of strings (several prompts in one request, read as one).
func promptInput(p gjson.Result) []Message {
	var parts []Part
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
	return []Message{{Role: "user", Parts: parts}}
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
