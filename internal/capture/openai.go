package capture

import (
	"strings"

	"github.com/tidwall/gjson"
)

func init() {
	RegisterInput("openai_chat", openAIChatInput)
	RegisterInput("openai_responses", responsesInput)
}

// openAIChatInput reads Chat Completions messages (also what vLLM,
// llama.cpp, Groq, Mistral and the other compatible servers take), or a
// legacy Completions prompt. System and developer messages stay in the
// messages, where the API puts them. Embeddings requests have neither.
func openAIChatInput(root gjson.Result) ([]Part, []Message) {
	msgs := root.Get("messages")
	if !msgs.IsArray() {
		return nil, promptInput(root.Get("prompt"))
	}
	var out []Message
	eachWhole(msgs, func(m gjson.Result) {
		if m.IsObject() {
			out = append(out, openAIChatMessage(m))
		}
	})
	return nil, out
}

func openAIChatMessage(m gjson.Result) Message {
	role := str(m.Get("role"))
	msg := Message{Role: normalRole(role), Name: str(m.Get("name"))}
	if msg.Role == "tool" {
		// A tool's answer: its content is the response to the call
		// tool_call_id names (legacy function messages name the
		// function instead).
		id := str(m.Get("tool_call_id"))
		if role == "function" {
			msg.Name = ""
			id = str(m.Get("name"))
		}
		msg.Parts = []Part{{Type: typeToolCallResponse, ID: id, Response: openAIContentText(m.Get("content"))}}
		return msg
	}
	// DeepSeek, vLLM and others accept the reasoning of earlier turns.
	msg.Parts = append(msg.Parts, textPart(typeReasoning, first(m, "reasoning_content", "reasoning").String())...)
	msg.Parts = append(msg.Parts, openAIContent(m.Get("content"))...)
	msg.Parts = append(msg.Parts, textPart(typeText, m.Get("refusal").String())...)
	m.Get("tool_calls").ForEach(func(_, c gjson.Result) bool {
		f := c.Get("function")
		msg.Parts = append(msg.Parts, Part{Type: typeToolCall, ID: str(c.Get("id")), Name: str(f.Get("name")), Args: jsonText(f.Get("arguments"))})
		return true
	})
	if f := m.Get("function_call"); f.IsObject() {
		msg.Parts = append(msg.Parts, Part{Type: typeToolCall, Name: str(f.Get("name")), Args: jsonText(f.Get("arguments"))})
	}
	msg.Parts = orEmpty(msg.Parts)
	return msg
}

// openAIContent reads a message's content: a string, or a list of typed
// parts (text, image_url, input_audio, file, refusal).
func openAIContent(c gjson.Result) []Part {
	if c.Type == gjson.String {
		return textPart(typeText, c.Str)
	}
	var parts []Part
	c.ForEach(func(_, p gjson.Result) bool {
		switch typ := p.Get("type").String(); typ {
		case "text", "input_text", "output_text":
			parts = append(parts, textPart(typeText, p.Get("text").String())...)
		case "refusal":
			parts = append(parts, textPart(typeText, p.Get("refusal").String())...)
		case "image_url":
			url := p.Get("image_url")
			if url.IsObject() {
				url = url.Get("url")
			}
			parts = append(parts, urlPart(url.String(), "image"))
		case "input_audio":
			a := p.Get("input_audio")
			parts = append(parts, Part{Type: typeBlob, Modality: "audio", MimeType: audioMime(str(a.Get("format"))), Content: []byte(a.Get("data").String())})
		case "file":
			parts = append(parts, openAIFile(p.Get("file")))
		case "input_image":
			// The Responses API's: a URL (or data: URL), or a file id.
			if id := str(p.Get("file_id")); id != "" {
				parts = append(parts, Part{Type: typeFile, Modality: "image", FileID: id})
			} else {
				parts = append(parts, urlPart(p.Get("image_url").String(), "image"))
			}
		case "input_file":
			switch {
			case p.Get("file_id").Exists():
				parts = append(parts, Part{Type: typeFile, Modality: "document", FileID: str(p.Get("file_id"))})
			case p.Get("file_url").Exists():
				parts = append(parts, Part{Type: typeURI, Modality: "document", URI: []byte(p.Get("file_url").String())})
			default:
				parts = append(parts, openAIFile(p))
			}
		default:
			if typ != "" {
				parts = append(parts, Part{Type: small(typ, new(bool))})
			}
		}
		return true
	})
	return parts
}

// openAIFile reads a file content part: an uploaded file's id, or the
// file's data inline as a data: URL.
func openAIFile(f gjson.Result) Part {
	if id := str(f.Get("file_id")); id != "" {
		return Part{Type: typeFile, Modality: "document", FileID: id}
	}
	data := f.Get("file_data").String()
	if strings.HasPrefix(data, "data:") {
		return urlPart(data, "document")
	}
	return Part{Type: typeBlob, Modality: "document", Content: []byte(data)}
}

// openAIContentText is a tool message's content as the response text: a
// string, or its text parts joined.
func openAIContentText(c gjson.Result) []byte {
	if c.Type == gjson.String || !c.IsArray() {
		return jsonText(c)
	}
	var b []byte
	c.ForEach(func(_, p gjson.Result) bool {
		b = append(b, p.Get("text").String()...)
		return true
	})
	return b
}

// audioMime is the media type of an audio format name (wav, mp3).
func audioMime(format string) string {
	if format == "" {
		return ""
	}
	return "audio/" + format
}

// responsesInput reads a Responses API request: instructions are the
// system instructions; input is a string (one user message) or a list of
// items, each read as the message it stands for. Items that refer to
// stored state (item_reference) carry no content and are skipped.
func responsesInput(root gjson.Result) ([]Part, []Message) {
	var sys []Part
	switch in := root.Get("instructions"); {
	case in.Type == gjson.String:
		sys = textPart(typeText, in.Str)
	case in.IsArray():
		// Instructions may also be given as input items.
		for _, m := range responsesItems(in) {
			sys = append(sys, m.Parts...)
		}
	}
	in := root.Get("input")
	if in.Type == gjson.String {
		return sys, []Message{{Role: "user", Parts: textPart(typeText, in.Str)}}
	}
	return sys, responsesItems(in)
}

func responsesItems(items gjson.Result) []Message {
	var msgs []Message
	eachWhole(items, func(it gjson.Result) {
		typ := it.Get("type").String()
		switch typ {
		case "", "message":
			msgs = append(msgs, Message{Role: normalRole(str(it.Get("role"))), Parts: orEmpty(openAIContent(it.Get("content")))})
		case "function_call", "custom_tool_call":
			args := it.Get("arguments")
			if typ == "custom_tool_call" {
				args = it.Get("input")
			}
			msgs = append(msgs, Message{Role: "assistant", Parts: []Part{{
				Type: typeToolCall, ID: str(it.Get("call_id")), Name: str(it.Get("name")), Args: jsonText(args)}}})
		case "function_call_output", "custom_tool_call_output":
			msgs = append(msgs, Message{Role: "tool", Parts: []Part{{
				Type: typeToolCallResponse, ID: str(it.Get("call_id")), Response: openAIContentText(it.Get("output"))}}})
		case "reasoning":
			var parts []Part
			it.Get("summary").ForEach(func(_, s gjson.Result) bool {
				parts = append(parts, textPart(typeReasoning, s.Get("text").String())...)
				return true
			})
			if len(parts) > 0 {
				msgs = append(msgs, Message{Role: "assistant", Parts: parts})
			}
		}
	})
	return msgs
}

// orEmpty makes a nil part list an empty one, which the schema's parts
// array needs.
func orEmpty(ps []Part) []Part {
	if ps == nil {
		return []Part{}
	}
	return ps
}
