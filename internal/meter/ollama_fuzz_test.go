package meter

import "testing"

// FuzzOllama feeds arbitrary bytes to the Ollama native dialect as an NDJSON stream and as a
// body: whatever the input, reading it must not panic, and cutting the
// stream at any point must not change what is measured.
func FuzzOllama(f *testing.F) {
	fuzzSeeds(f, "ollama")
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		fuzzDialect(t, func() Dialect { return ollama{} }, "/api/chat", "application/x-ndjson", data, cut)
	})
}
