package meter

import "testing"

// BenchmarkOllamaEvent is the per-event cost on the hot path: one NDJSON line
// framed and read by the Ollama native dialect, fed one NDJSON line per Write as
// reverse_proxy delivers them.
func BenchmarkOllamaEvent(b *testing.B) {
	mt := exchange{200, "application/x-ndjson", ""}.start(ollama{}, Options{}, nil)
	benchEvent(b, mt, ollamaLines(testdata(b, "ollama", "chat.ndjson")), 1, 3)
}
