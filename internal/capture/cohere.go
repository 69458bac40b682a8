package capture

import "github.com/tidwall/gjson"

func init() { RegisterInput("cohere_chat", cohereInput) }

// cohereInput reads a Cohere v2 chat request. System messages stay in the
// messages, where the API puts them; an assistant's tool_plan is the
// reasoning before its tool calls.
func cohereInput(root gjson.Result) ([]Part, []Message) {
	var msgs []Message
	eachWhole(root.Get("messages"), func(m gjson.Result) {
		msg := Message{Role: normalRole(str(m.Get("role")))}
		if msg.Role == "tool" {
			msg.Parts = []Part{{Type: typeToolCallResponse, ID: str(m.Get("tool_call_id")), Response: cohereContentText(m.Get("content"))}}
			msgs = append(msgs, msg)
			return
		}
		msg.Parts = append(msg.Parts, textPart(typeReasoning, m.Get("tool_plan").String())...)
		msg.Parts = append(msg.Parts, cohereContent(m.Get("content"))...)
		m.Get("tool_calls").ForEach(func(_, c gjson.Result) bool {
			f := c.Get("function")
			msg.Parts = append(msg.Parts, Part{Type: typeToolCall, ID: str(c.Get("id")), Name: str(f.Get("name")), Args: jsonText(f.Get("arguments"))})
			return true
		})
		msg.Parts = orEmpty(msg.Parts)
		msgs = append(msgs, msg)
	})
	return nil, msgs
}

// cohereContent reads content: a string, or text, thinking, image and
// document parts.
func cohereContent(c gjson.Result) []Part {
	if c.Type == gjson.String {
		return textPart(typeText, c.Str)
	}
	var parts []Part
	c.ForEach(func(_, p gjson.Result) bool {
		switch typ := p.Get("type").String(); typ {
		case "text":
			parts = append(parts, textPart(typeText, p.Get("text").String())...)
		case "thinking":
			parts = append(parts, textPart(typeReasoning, p.Get("thinking").String())...)
		case "image_url":
			url := p.Get("image_url")
			if url.IsObject() {
				url = url.Get("url")
			}
			parts = append(parts, urlPart(url.String(), "image"))
		case "document":
			parts = append(parts, Part{Type: typeBlob, Modality: "document", Content: jsonText(p.Get("document"))})
		default:
			if typ != "" {
				parts = append(parts, Part{Type: small(typ, new(bool))})
			}
		}
		return true
	})
	return parts
}

// cohereContentText is a tool message's content as the response: a
// string, or its parts (text, or documents holding the tool's result).
func cohereContentText(c gjson.Result) []byte {
	if !c.IsArray() {
		return jsonText(c)
	}
	var b []byte
	c.ForEach(func(_, p gjson.Result) bool {
		if t := p.Get("text"); t.Exists() {
			b = append(b, t.String()...)
		} else if d := p.Get("document"); d.Exists() {
			b = append(b, jsonText(d)...)
		}
		return true
	})
	return b
}
