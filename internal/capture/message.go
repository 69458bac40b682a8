package capture

import "strings"

// DefaultMaxSize is the default bound, in bytes, of each content
// attribute's JSON: enough for a short conversation, small enough that a
// span stays well under the limits collectors put on attribute values.
const DefaultMaxSize = 16 << 10

// MinMaxSize is the smallest bound accepted: below it not even the shape
// of one message with a few parts fits, and every capture would be empty.
const MinMaxSize = 256

// smallMax bounds the fields that are names rather than content (roles,
// ids, tool names, media types): they are short in every real API, and a
// hostile value must not crowd the content out.
const smallMax = 256

// Part types of the conventions' schemas.
const (
	typeText             = "text"
	typeReasoning        = "reasoning"
	typeToolCall         = "tool_call"
	typeToolCallResponse = "tool_call_response"
	typeBlob             = "blob"
	typeURI              = "uri"
	typeFile             = "file"
)

// Part is one message part, as the conventions' schemas define it. Type
// is one of their part types ("text", "reasoning", "tool_call",
// "tool_call_response", "blob", "uri", "file") and says which fields are
// written; the content fields (Content, Args, Response, URI) are the ones
// truncation cuts, the others are capped at 256 bytes when set. It is
// exported for the readers of dialects registered with RegisterInput.
type Part struct {
	Type string
	// Content is the text of text and reasoning parts, or a blob's
	// base64 data.
	Content []byte
	// ID is a tool call's id, or the id of the call a response answers.
	ID string
	// Name is the tool called.
	Name string
	// Args are a tool call's arguments: JSON text, written as JSON when
	// it is valid and whole, else as a string.
	Args []byte
	// Response is a tool call response: JSON text or plain text, written
	// as Args are.
	Response []byte
	// Modality ("image", "audio", "video", "document"), MimeType, URI and
	// FileID describe blob, uri and file parts.
	Modality, MimeType string
	URI                []byte
	FileID             string

	// item identifies the tool call a streamed fragment belongs to; it is
	// not written.
	item int
}

// Message is one input or output message. Role is the conventions' role
// (user, assistant, system, tool, or as the API names it).
type Message struct {
	Role  string
	Name  string
	Parts []Part
	// FinishReason is written on output messages only (hasFinish).
	FinishReason string
	hasFinish    bool
}

// small caps a name-like field.
func small(s string, truncated *bool) string {
	if len(s) <= smallMax {
		return s
	}
	*truncated = true
	cut := smallMax
	for cut > 0 && !runeStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// runeStart reports whether b can start a UTF-8 encoded character.
func runeStart(b byte) bool { return b&0xC0 != 0x80 }

// textPart is a text part, nil when s is empty: an empty string carries
// nothing worth a part.
func textPart(typ, s string) []Part {
	if s == "" {
		return nil
	}
	return []Part{{Type: typ, Content: []byte(s)}}
}

// modalityOf names a media type's modality as the conventions do.
func modalityOf(mimeType, fallback string) string {
	switch {
	case strings.HasPrefix(mimeType, "image/"):
		return "image"
	case strings.HasPrefix(mimeType, "audio/"):
		return "audio"
	case strings.HasPrefix(mimeType, "video/"):
		return "video"
	case mimeType == "application/pdf" || strings.HasPrefix(mimeType, "text/"):
		return "document"
	}
	return fallback
}

// urlPart is a part for a URL given as the content of a message: a data:
// URL becomes a blob with its media type and base64 data, any other URL a
// uri part.
func urlPart(url, modality string) Part {
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		if meta, data, ok := strings.Cut(rest, ","); ok {
			mime, _, _ := strings.Cut(meta, ";")
			return Part{Type: typeBlob, Modality: modalityOf(mime, modality), MimeType: mime, Content: []byte(data)}
		}
	}
	return Part{Type: typeURI, Modality: modality, URI: []byte(url)}
}

// normalRole maps the roles APIs use for the model to the conventions'
// assistant, and tool-result roles to tool; others (system, developer,
// user) are kept as written.
func normalRole(role string) string {
	switch role {
	case "model", "CHATBOT", "chatbot":
		return "assistant"
	case "function", "tool", "ipython":
		return "tool"
	case "":
		return "user"
	}
	return role
}
