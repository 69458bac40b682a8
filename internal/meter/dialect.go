package meter

import (
	"strings"

	"github.com/tokentap/tokentap/sse"
)

// Dialect reads one API's wire format. It turns complete events and bodies
// into observations on an Observer; the Meter does the framing and keeps the
// clock, so a dialect never deals with byte splits or time.
//
// A Dialect may keep per-exchange state; New in its registration returns a
// fresh one per exchange (a stateless dialect may return a shared value).
type Dialect interface {
	// Name is the dialect's configuration name, e.g. "openai_chat".
	Name() string
	// Operation is the semconv gen_ai.operation.name for a request path.
	Operation(path string) string
	// Request reads the client's parameters from the request path (some
	// APIs put the model or the streaming choice there) and body, which may
	// be a prefix of the whole body when it exceeded the tee's cap.
	Request(r *Request, path string, body []byte)
	// Event reads one complete server-sent event.
	Event(o *Observer, ev *sse.Event)
	// Body reads a complete non-streamed response body, which is also how
	// error responses arrive.
	Body(o *Observer, body []byte)
}

// DialectInfo registers a dialect under a name.
type DialectInfo struct {
	// Name is what users write in the dialect option.
	Name string
	// New returns the Dialect for one exchange.
	New func() Dialect
	// Provider is the default gen_ai.provider.name for traffic in this
	// dialect when neither configuration nor the upstream host says better.
	Provider string
	// Matches reports whether a request path belongs to this dialect, for
	// automatic selection.
	Matches func(path string) bool
}

// dialects is the registry, in detection order: earlier entries win.
var dialects = []DialectInfo{openAIChatInfo}

// RegisterDialect adds a dialect, for formats tokentap does not ship. It
// must be called from an init function, before any Meter is created; a name
// already taken panics, as Caddy's RegisterModule does.
func RegisterDialect(d DialectInfo) {
	if d.Name == "" || d.New == nil {
		panic("meter: dialect needs a name and a New function")
	}
	if _, ok := LookupDialect(d.Name); ok {
		panic("meter: dialect already registered: " + d.Name)
	}
	dialects = append(dialects, d)
}

// LookupDialect returns the registered dialect with the given name.
func LookupDialect(name string) (DialectInfo, bool) {
	for _, d := range dialects {
		if d.Name == name {
			return d, true
		}
	}
	return DialectInfo{}, false
}

// DialectNames lists the registered dialect names, for error messages.
func DialectNames() []string {
	names := make([]string, len(dialects))
	for i, d := range dialects {
		names[i] = d.Name
	}
	return names
}

// DetectDialect picks the dialect for a request path. OpenAI's chat format is
// the fallback because it is what most servers speak.
func DetectDialect(path string) DialectInfo {
	for _, d := range dialects {
		if d.Matches != nil && d.Matches(path) {
			return d
		}
	}
	return openAIChatInfo
}

// DialectForPath reports the dialect whose paths include path, and false
// when none claims it (DetectDialect then falls back to OpenAI chat).
func DialectForPath(path string) (DialectInfo, bool) {
	for _, d := range dialects {
		if d.Matches != nil && d.Matches(path) {
			return d, true
		}
	}
	return DialectInfo{}, false
}

// DialectForMediaType picks a dialect from a response's media type, for
// responses on paths no dialect claims (a gateway that rewrites paths): the
// framing alone says Ollama (NDJSON) or Bedrock (binary event stream).
func DialectForMediaType(mediaType string) (DialectInfo, bool) {
	switch mediaType {
	case "application/x-ndjson":
		return LookupDialect("ollama")
	case "application/vnd.amazon.eventstream":
		return LookupDialect("bedrock_converse")
	}
	return DialectInfo{}, false
}

// hasPathSuffix reports whether path ends with suffix at a segment boundary,
// ignoring a trailing slash, so "/v1/chat/completions/" matches
// "/chat/completions" but "/v1/xchat/completions" does not.
func hasPathSuffix(path, suffix string) bool {
	path = strings.TrimSuffix(path, "/")
	if !strings.HasSuffix(path, suffix) {
		return false
	}
	rest := path[:len(path)-len(suffix)]
	return rest == "" || strings.HasSuffix(rest, "/") || suffix[0] == '/'
}

// Header is a response's header as net/http's Header gives it: the value
// of a canonical header name, "" when absent.
type Header interface {
	Get(key string) string
}

// HeaderReader is implemented by dialects that read something from the
// response's header (Bedrock's token counts), as a fallback for what the
// body does not say. Meter.ResponseHeader calls it, before any of the body.
type HeaderReader interface {
	ResponseHeader(o *Observer, h Header)
}
