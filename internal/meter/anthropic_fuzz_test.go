package meter

import (
	"testing"
)

// FuzzAnthropicMessages feeds arbitrary bytes to the Anthropic dialect as an
// event stream and as a body. Whatever the input, reading it must not
// panic, and cutting the stream at any point must not change what is
// measured.
func FuzzAnthropicMessages(f *testing.F) {
	fuzzSeeds(f, "anthropic")
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		fuzzDialect(t, func() Dialect { return newAnthropicMessages() }, "/v1/messages", "text/event-stream", data, cut)
	})
}
