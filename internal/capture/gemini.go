package capture

import "github.com/tidwall/gjson"

func init() { RegisterInput("gemini", geminiInput) }

// geminiInput reads a generateContent request (Gemini API and Vertex AI):
// systemInstruction is the system instructions, contents the messages.
// The API takes proto field names too, so snake_case is read as well.
func geminiInput(root gjson.Result) ([]Part, []Message) {
	var sys []Part
	switch si := first(root, "systemInstruction", "system_instruction"); {
	case si.Type == gjson.String:
		sys = textPart(typeText, si.Str)
	case si.IsObject():
		sys = geminiParts(si.Get("parts"))
	}
	var msgs []Message
	eachWhole(root.Get("contents"), func(c gjson.Result) {
		msgs = append(msgs, Message{Role: normalRole(str(c.Get("role"))), Parts: orEmpty(geminiParts(c.Get("parts")))})
	})
	return sys, msgs
}

// geminiParts reads a Content's parts: text (thought text is reasoning),
// inline data, file data, function calls and responses, and the code the
// model ran with its results.
func geminiParts(ps gjson.Result) []Part {
	var parts []Part
	ps.ForEach(func(_, p gjson.Result) bool {
		if t := p.Get("text"); t.Exists() {
			typ := typeText
			if p.Get("thought").Bool() {
				typ = typeReasoning
			}
			parts = append(parts, textPart(typ, t.String())...)
		}
		if d := first(p, "inlineData", "inline_data"); d.IsObject() {
			mime := str(first(d, "mimeType", "mime_type"))
			parts = append(parts, Part{Type: typeBlob, Modality: modalityOf(mime, "image"), MimeType: mime, Content: []byte(d.Get("data").String())})
		}
		if f := first(p, "fileData", "file_data"); f.IsObject() {
			mime := str(first(f, "mimeType", "mime_type"))
			parts = append(parts, Part{Type: typeURI, Modality: modalityOf(mime, "image"), MimeType: mime, URI: []byte(first(f, "fileUri", "file_uri").String())})
		}
		if fc := first(p, "functionCall", "function_call"); fc.IsObject() {
			parts = append(parts, Part{Type: typeToolCall, ID: str(fc.Get("id")), Name: str(fc.Get("name")), Args: jsonText(fc.Get("args"))})
		}
		if fr := first(p, "functionResponse", "function_response"); fr.IsObject() {
			// Gemini ties a response to its call by name, and by id when
			// the call had one.
			id := str(fr.Get("id"))
			if id == "" {
				id = str(fr.Get("name"))
			}
			parts = append(parts, Part{Type: typeToolCallResponse, ID: id, Response: jsonText(fr.Get("response"))})
		}
		if code := first(p, "executableCode", "executable_code"); code.IsObject() {
			parts = append(parts, Part{Type: typeToolCall, Name: "code_execution", Args: []byte(code.Raw)})
		}
		if res := first(p, "codeExecutionResult", "code_execution_result"); res.IsObject() {
			parts = append(parts, Part{Type: typeToolCallResponse, Response: []byte(res.Raw)})
		}
		return true
	})
	return parts
}
