package meter

import (
	"bytes"

	"github.com/tidwall/gjson"

	"github.com/tokentap/tokentap/sse"
)

// anthropicMessagesInfo registers Anthropic's Messages API. Only /v1/messages
// is claimed: a bare "/messages" suffix would also take OpenAI's Assistants
// thread messages, and /v1/messages/count_tokens is not a generation.
var anthropicMessagesInfo = DialectInfo{
	Name:     "anthropic_messages",
	New:      func() Dialect { return newAnthropicMessages() },
	Provider: "anthropic",
	Matches:  func(path string) bool { return hasPathSuffix(path, "/v1/messages") },
}

func init() {
	RegisterDialect(anthropicMessagesInfo)
	// Anthropic's error types recur on every failing exchange; interning
	// them keeps Observer.Error from allocating for each one.
	for _, s := range []string{
		"authentication_error", "permission_error", "not_found_error",
		"request_too_large", "rate_limit_error", "billing_error", "timeout_error",
		// Stop reasons beyond those every dialect shares.
		"model_context_window_exceeded", "compaction",
	} {
		interned[s] = s
	}
}

// anthropicMessages keeps the three parts of the input count, because
// Anthropic reports input_tokens without the cached tokens and semconv wants
// their sum: when a later message_delta repeats only some of the parts, the
// sum still needs the others.
type anthropicMessages struct {
	usage usageParts
}

func newAnthropicMessages() *anthropicMessages {
	return &anthropicMessages{usage: newUsageParts()}
}

// Name implements Dialect.
func (*anthropicMessages) Name() string { return anthropicMessagesInfo.Name }

// Operation implements Dialect: the Messages API only chats.
func (*anthropicMessages) Operation(string) string { return "chat" }

// Request implements Dialect.
func (*anthropicMessages) Request(r *Request, _ string, body []byte) {
	readRequest(r, body, anthropicRequest)
	readSampling(r, gjson.ParseBytes(body), anthropicSampling)
}

// Event implements Dialect: the event is read as anthropic_events.go
// reads Claude's events for every API that carries them.
func (a *anthropicMessages) Event(o *Observer, ev *sse.Event) {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 || data[0] != '{' {
		o.Degrade("event_not_json")
		return
	}
	var e anthropicEvent
	rawMembers(view(data), e.member)
	e.read(o, &a.usage, ev.Type)
}

// Body implements Dialect: a whole Message, or an error object.
func (a *anthropicMessages) Body(o *Observer, body []byte) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		o.Degrade("body_not_json")
		return
	}
	anthropicBody(o, &a.usage, view(body))
}

// estimateText is EstimateTokens made safe for bytes it does not expect. A
// raw control character or DEL is invalid inside a JSON string but can come
// from a broken or hostile upstream, and EstimateTokens's loop does not move
// past one; so each such byte counts as one token and the runs between them
// are estimated as usual. It costs one extra pass over the text.
func estimateText(s []byte) int64 {
	var n int64
	start := 0
	for i, c := range s {
		if c < ' ' || c == 0x7f {
			n += EstimateTokens(s[start:i]) + 1
			start = i + 1
		}
	}
	return n + EstimateTokens(s[start:])
}
