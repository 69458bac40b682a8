package meter

import "testing"

// FuzzCohere feeds arbitrary bytes to the Cohere v2 chat dialect as an event stream and as a
// body: whatever the input, reading it must not panic, and cutting the
// stream at any point must not change what is measured.
func FuzzCohere(f *testing.F) {
	fuzzSeeds(f, "cohere")
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		fuzzDialect(t, func() Dialect { return cohereChat{} }, "/v2/chat", "text/event-stream", data, cut)
	})
}
