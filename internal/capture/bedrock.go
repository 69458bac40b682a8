package capture

import "github.com/tidwall/gjson"

func init() {
	RegisterInput("bedrock_converse", bedrockConverseInput)
	RegisterInput("bedrock_invoke", bedrockInvokeInput)
}

// bedrockConverseInput reads a Converse request: system is a list of
// blocks (text is the instructions; guard content and cache points are
// not), messages have content blocks of text, images, documents, video,
// tool use and results, and reasoning.
func bedrockConverseInput(root gjson.Result) ([]Part, []Message) {
	var sys []Part
	root.Get("system").ForEach(func(_, b gjson.Result) bool {
		sys = append(sys, textPart(typeText, b.Get("text").String())...)
		return true
	})
	var msgs []Message
	eachWhole(root.Get("messages"), func(m gjson.Result) {
		var parts []Part
		m.Get("content").ForEach(func(_, b gjson.Result) bool {
			parts = append(parts, bedrockBlock(b)...)
			return true
		})
		msgs = append(msgs, Message{Role: normalRole(str(m.Get("role"))), Parts: orEmpty(parts)})
	})
	return sys, msgs
}

func bedrockBlock(b gjson.Result) []Part {
	if t := b.Get("text"); t.Exists() {
		return textPart(typeText, t.String())
	}
	if r := b.Get("reasoningContent.reasoningText.text"); r.Exists() {
		return textPart(typeReasoning, r.String())
	}
	if u := b.Get("toolUse"); u.IsObject() {
		return []Part{{Type: typeToolCall, ID: str(u.Get("toolUseId")), Name: str(u.Get("name")), Args: jsonText(u.Get("input"))}}
	}
	if r := b.Get("toolResult"); r.IsObject() {
		var resp []byte
		r.Get("content").ForEach(func(_, c gjson.Result) bool {
			if t := c.Get("text"); t.Exists() {
				resp = append(resp, t.String()...)
			} else if j := c.Get("json"); j.Exists() {
				resp = append(resp, j.Raw...)
			}
			return true
		})
		return []Part{{Type: typeToolCallResponse, ID: str(r.Get("toolUseId")), Response: resp}}
	}
	for _, media := range [...]struct{ key, modality string }{{"image", "image"}, {"document", "document"}, {"video", "video"}} {
		m := b.Get(media.key)
		if !m.IsObject() {
			continue
		}
		format := str(m.Get("format"))
		if uri := m.Get("source.s3Location.uri"); uri.Exists() {
			return []Part{{Type: typeURI, Modality: media.modality, MimeType: format, URI: []byte(uri.String())}}
		}
		return []Part{{Type: typeBlob, Modality: media.modality, MimeType: format, Content: []byte(m.Get("source.bytes").String())}}
	}
	return nil
}

// bedrockInvokeInput reads an InvokeModel body, which is the model's own
// request format: Anthropic's Messages for Claude, a prompt for Llama and
// Mistral, inputText for Titan.
func bedrockInvokeInput(root gjson.Result) ([]Part, []Message) {
	if root.Get("messages").IsArray() {
		return anthropicInput(root)
	}
	if p := root.Get("prompt"); p.Exists() {
		return nil, promptInput(p)
	}
	return nil, promptInput(root.Get("inputText"))
}
