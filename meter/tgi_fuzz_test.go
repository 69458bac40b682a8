package meter

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzTGI feeds arbitrary bytes to the TGI dialect as an event stream and as a
// body. Whatever the input, reading it must not panic, and cutting the
// stream at any point must not change what is measured.
func FuzzTGI(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "tgi", "*"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		// Every event boundary and its neighbours; TestTGISplitInvariance
		// already covers every split point without the fuzzer's overhead.
		f.Add(b, uint16(0))
		for i := 0; i < len(b); i++ {
			if b[i] == '\n' {
				for _, c := range []int{i - 1, i, i + 1} {
					if c >= 0 && c <= len(b) {
						f.Add(b, uint16(c))
					}
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		c := int(cut) % (len(data) + 1)
		run := func(contentType string, pieces ...[]byte) Measurement {
			mt := New(tgi{}, Options{MaxEventSize: 4096}, t0)
			mt.Request("/generate_stream", data, false)
			mt.Response(200, contentType, "")
			for _, p := range pieces {
				mt.Write(p, t0.Add(step))
			}
			return *mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
		}
		whole := run("text/event-stream", data)
		split := run("text/event-stream", data[:c], data[c:])
		if !reflect.DeepEqual(whole, split) {
			t.Fatalf("cut at %d changed the measurement:\nwhole %+v\nsplit %+v", c, whole, split)
		}
		if whole.Usage.OutputTokens < -1 || whole.Chunks < 0 || whole.EstimatedOutputTokens < 0 {
			t.Fatalf("impossible counts: %+v", whole)
		}
		body := run("application/json", data[:c], data[c:])
		if body.Usage.OutputTokens < -1 || body.EstimatedOutputTokens < 0 {
			t.Fatalf("impossible counts: %+v", body)
		}
	})
}
