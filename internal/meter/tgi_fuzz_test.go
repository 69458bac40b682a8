package meter

import "testing"

// FuzzTGI feeds arbitrary bytes to the TGI dialect as an event stream and as a
// body: whatever the input, reading it must not panic, and cutting the
// stream at any point must not change what is measured.
func FuzzTGI(f *testing.F) {
	fuzzSeeds(f, "tgi")
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		fuzzDialect(t, func() Dialect { return tgi{} }, "/generate_stream", "text/event-stream", data, cut)
	})
}
