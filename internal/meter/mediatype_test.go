package meter

import (
	"mime"
	"strings"
	"testing"
)

// TestMediaTypeOf: the media type read without mime.ParseMediaType's map
// is the one the parser gives, with the whole value as the fallback when
// it fails, for every shape of value.
func TestMediaTypeOf(t *testing.T) {
	for _, tt := range []struct {
		name, contentType, want string
	}{
		{"bare", "text/event-stream", "text/event-stream"},
		{"upper case", "Text/Event-Stream", "text/event-stream"},
		{"spaces around", "  application/json\t", "application/json"},
		{"a parameter", "text/event-stream; charset=utf-8", "text/event-stream"},
		{"upper case with a parameter", "Application/JSON; Charset=UTF-8", "application/json"},
		{"a bad parameter: the whole value", "text/event-stream; charset", "text/event-stream; charset"},
		{"no subtype", "text", "text"},
		{"not a token", "text/event stream", "text/event stream"},
		{"empty", "", ""},
		{"only a parameter", "; charset=utf-8", "; charset=utf-8"},
		{"non-ASCII", "téxt/plain", "téxt/plain"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := mediaTypeOf(tt.contentType)
			if got != tt.want {
				t.Errorf("mediaTypeOf(%q) = %q, want %q", tt.contentType, got, tt.want)
			}
			ref, _, err := mime.ParseMediaType(tt.contentType)
			if err != nil {
				ref = strings.ToLower(strings.TrimSpace(tt.contentType))
			}
			if got != ref {
				t.Errorf("mediaTypeOf(%q) = %q, the parser's rule gives %q", tt.contentType, got, ref)
			}
		})
	}
	if n := testing.AllocsPerRun(100, func() { _ = mediaTypeOf("text/event-stream") }); n != 0 {
		t.Errorf("a value without parameters allocates %v times, want 0", n)
	}
}
