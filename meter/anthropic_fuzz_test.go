package meter

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzAnthropicMessages feeds arbitrary bytes to the Anthropic dialect as an
// event stream and as a body. Whatever the input, reading it must not
// panic, and cutting the stream at any point must not change what is
// measured.
func FuzzAnthropicMessages(f *testing.F) {
	anthropicFuzzSeeds(f, "anthropic")
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		anthropicFuzzRun(t, func() Dialect { return newAnthropicMessages() }, "/v1/messages", data, cut)
	})
}

// anthropicFuzzSeeds adds every fixture of a dialect, whole and cut at every
// event boundary and its neighbours (TestAnthropicSplitInvariance and its
// siblings already try every split point without the fuzzer's overhead).
func anthropicFuzzSeeds(f *testing.F, dir string) {
	files, _ := filepath.Glob(filepath.Join("testdata", dir, "*"))
	if len(files) == 0 {
		f.Fatal("no fixtures in", dir)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
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
}

// anthropicFuzzRun reads data as a stream, whole and cut in two, and as a body,
// and fails if the two stream readings differ or a count is impossible.
func anthropicFuzzRun(t *testing.T, newDialect func() Dialect, path string, data []byte, cut uint16) {
	c := int(cut) % (len(data) + 1)
	run := func(contentType string, pieces ...[]byte) Measurement {
		mt := New(newDialect(), Options{MaxEventSize: 4096}, t0)
		mt.Request(path, data, false)
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
	for _, m := range []Measurement{whole, run("application/json", data[:c], data[c:])} {
		u := m.Usage
		if u.InputTokens < -1 || u.OutputTokens < -1 || u.CacheReadInputTokens < -1 ||
			u.CacheCreationInputTokens < -1 || u.ReasoningOutputTokens < -1 || m.Chunks < 0 ||
			m.OutputEvents > m.Chunks || len(m.FinishReasons) > maxChoices {
			t.Fatalf("impossible measurement: %+v", m)
		}
	}
}
