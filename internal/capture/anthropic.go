package capture

import "github.com/tidwall/gjson"

func init() { RegisterInput("anthropic_messages", anthropicInput) }

// anthropicInput reads a Messages API request (also InvokeModel's body for
// Claude on Bedrock): system, a string or text blocks, is the system
// instructions; each message's content is a string or a list of blocks.
func anthropicInput(root gjson.Result) ([]Part, []Message) {
	sys := anthropicBlocks(root.Get("system"))
	var msgs []Message
	eachWhole(root.Get("messages"), func(m gjson.Result) {
		msgs = append(msgs, Message{Role: normalRole(str(m.Get("role"))), Parts: orEmpty(anthropicBlocks(m.Get("content")))})
	})
	return sys, msgs
}

// anthropicBlocks reads content: a string, or blocks of text, images,
// documents, tool use and results, and thinking. Redacted thinking is an
// encrypted blob with nothing readable in it.
func anthropicBlocks(c gjson.Result) []Part {
	if c.Type == gjson.String {
		return textPart(typeText, c.Str)
	}
	var parts []Part
	c.ForEach(func(_, b gjson.Result) bool {
		switch typ := b.Get("type").String(); typ {
		case "text":
			parts = append(parts, textPart(typeText, b.Get("text").String())...)
		case "thinking":
			parts = append(parts, textPart(typeReasoning, b.Get("thinking").String())...)
		case "image", "document":
			modality := "image"
			if typ == "document" {
				modality = "document"
			}
			parts = append(parts, anthropicSource(b.Get("source"), modality))
		case "tool_use", "server_tool_use":
			parts = append(parts, Part{Type: typeToolCall, ID: str(b.Get("id")), Name: str(b.Get("name")), Args: jsonText(b.Get("input"))})
		case "tool_result":
			parts = append(parts, Part{Type: typeToolCallResponse, ID: str(b.Get("tool_use_id")), Response: anthropicResultText(b.Get("content"))})
		case "redacted_thinking", "":
		default:
			if id := b.Get("tool_use_id"); id.Exists() {
				// Server tool results (web_search_tool_result, ...).
				parts = append(parts, Part{Type: typeToolCallResponse, ID: str(id), Response: jsonText(b.Get("content"))})
			} else {
				parts = append(parts, Part{Type: small(typ, new(bool))})
			}
		}
		return true
	})
	return parts
}

// anthropicSource reads an image or document source: base64 data, a URL,
// an uploaded file, or (documents) plain text.
func anthropicSource(s gjson.Result, modality string) Part {
	mime := str(s.Get("media_type"))
	switch s.Get("type").String() {
	case "base64", "text":
		return Part{Type: typeBlob, Modality: modalityOf(mime, modality), MimeType: mime, Content: []byte(s.Get("data").String())}
	case "url":
		return Part{Type: typeURI, Modality: modality, URI: []byte(s.Get("url").String())}
	case "file":
		return Part{Type: typeFile, Modality: modality, FileID: str(s.Get("file_id"))}
	}
	return Part{Type: typeBlob, Modality: modality, MimeType: mime}
}

// anthropicResultText is a tool_result's content as the response: a
// string, or its text blocks joined.
func anthropicResultText(c gjson.Result) []byte {
	if !c.IsArray() {
		return jsonText(c)
	}
	var b []byte
	c.ForEach(func(_, blk gjson.Result) bool {
		b = append(b, blk.Get("text").String()...)
		return true
	})
	return b
}
