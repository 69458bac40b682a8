package meter

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// geminiFuzzExchanges are the ways a fuzzed body is served: as an alt=sse
// stream, as the default streamed array, as a generateContent body and as
// an error body.
var geminiFuzzExchanges = []exchange{
	{200, "text/event-stream", geminiStreamPath},
	{200, "application/json", geminiStreamPath},
	{200, "application/json", geminiGeneratePath},
	{503, "application/json", geminiStreamPath},
}

// FuzzGemini feeds arbitrary bytes to the Gemini dialect in every framing.
// Whatever the input, reading it must not panic, and cutting it at any point
// must not change what is measured.
func FuzzGemini(f *testing.F) {
	files := geminiFixtureFiles()
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		mode := uint8(2)
		switch base := filepath.Base(name); {
		case strings.HasPrefix(base, "sse_"):
			mode = 0
		case strings.HasPrefix(base, "array_"):
			mode = 1
		case strings.HasPrefix(base, "error_"):
			mode = 3
		}
		f.Add(b, uint16(0), mode)
		// Event and element boundaries and their neighbours;
		// TestGeminiSplitInvariance covers every split point already.
		for i := 0; i < len(b); i++ {
			if b[i] == '\n' || (mode == 1 && b[i] == ',') {
				for _, c := range []int{i - 1, i, i + 1} {
					if c >= 0 && c <= len(b) {
						f.Add(b, uint16(c), mode)
					}
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, cut uint16, mode uint8) {
		x := geminiFuzzExchanges[int(mode)%len(geminiFuzzExchanges)]
		c := int(cut) % (len(data) + 1)
		run := func(pieces ...[]byte) Measurement {
			mt := New(newGemini(), Options{MaxEventSize: 4096}, t0)
			mt.Request(x.path, data, false)
			mt.Response(x.status, x.contentType, "")
			for _, p := range pieces {
				mt.Write(p, t0.Add(step))
			}
			return *mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
		}
		whole := run(data)
		split := run(data[:c], data[c:])
		if !reflect.DeepEqual(whole, split) {
			t.Fatalf("cut at %d changed the measurement:\nwhole %+v\nsplit %+v", c, whole, split)
		}
		if whole.Chunks < 0 || whole.OutputEvents > whole.Chunks || whole.EstimatedOutputTokens < 0 {
			t.Fatalf("impossible counts: %+v", whole)
		}
		if whole.FirstToken != 0 && (whole.FirstToken > whole.LastToken || whole.FirstToken > time.Duration(2*step)) {
			t.Fatalf("impossible times: %+v", whole)
		}
	})
}
