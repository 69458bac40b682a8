package capture

import "github.com/tidwall/gjson"

func init() { RegisterInput("ollama", ollamaInput) }

// ollamaInput reads Ollama's native requests: /api/chat's messages, or
// /api/generate's system and prompt (with its images).
func ollamaInput(root gjson.Result) ([]Part, []Message) {
	if msgs := root.Get("messages"); msgs.IsArray() {
		var out []Message
		eachWhole(msgs, func(m gjson.Result) {
			out = append(out, ollamaMessage(m))
		})
		return nil, out
	}
	sys := textPart(typeText, root.Get("system").String())
	parts := append(textPart(typeText, root.Get("prompt").String()), ollamaImages(root.Get("images"))...)
	if len(parts) == 0 {
		return sys, nil
	}
	return sys, []Message{{Role: "user", Parts: parts}}
}

func ollamaMessage(m gjson.Result) Message {
	msg := Message{Role: normalRole(str(m.Get("role")))}
	if msg.Role == "tool" {
		// Ollama names the tool that answered, not the call.
		msg.Parts = []Part{{Type: typeToolCallResponse, ID: str(m.Get("tool_name")), Response: jsonText(m.Get("content"))}}
		return msg
	}
	msg.Parts = append(msg.Parts, textPart(typeReasoning, m.Get("thinking").String())...)
	msg.Parts = append(msg.Parts, textPart(typeText, m.Get("content").String())...)
	msg.Parts = append(msg.Parts, ollamaImages(m.Get("images"))...)
	m.Get("tool_calls").ForEach(func(_, c gjson.Result) bool {
		f := c.Get("function")
		msg.Parts = append(msg.Parts, Part{Type: typeToolCall, ID: str(c.Get("id")), Name: str(f.Get("name")), Args: jsonText(f.Get("arguments"))})
		return true
	})
	msg.Parts = orEmpty(msg.Parts)
	return msg
}

// ollamaImages reads a list of base64 images.
func ollamaImages(imgs gjson.Result) []Part {
	var parts []Part
	imgs.ForEach(func(_, i gjson.Result) bool {
		parts = append(parts, Part{Type: typeBlob, Modality: "image", Content: []byte(i.String())})
		return true
	})
	return parts
}
