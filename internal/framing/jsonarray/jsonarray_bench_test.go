package jsonarray

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/splitfeed"
)

// BenchmarkDecoder is the cost per byte of a Gemini pretty-printed stream
// fed whole.
func BenchmarkDecoder(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("testdata", "gemini_pretty.json"))
	if err != nil {
		b.Fatal(err)
	}
	d := &Decoder{OnElement: func([]byte) {}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		d.Write(body)
		d.Close()
	}
}

// BenchmarkDecoderSplit feeds the same stream in 100-byte writes, so
// elements are carried across writes as they are on the wire.
func BenchmarkDecoderSplit(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("testdata", "gemini_pretty.json"))
	if err != nil {
		b.Fatal(err)
	}
	writes := splitfeed.Sized(body, 100)
	d := &Decoder{OnElement: func([]byte) {}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		for _, w := range writes {
			d.Write(w)
		}
		d.Close()
	}
}
