package tokencount

import (
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

// vocabularyHeapBound is the most loading one vocabulary may add to the
// live heap; docs/telemetry.md ("Estimated output tokens") states it.
const vocabularyHeapBound = 8 << 20

// TestVocabularyMemory holds the memory a Counter's first use costs to
// vocabularyHeapBound, for each offered encoding. The vocabularies are
// package-level in the tokenizer and load once per process, so each is
// measured in a fresh copy of this test binary, where nothing has loaded
// it yet.
func TestVocabularyMemory(t *testing.T) {
	if e := os.Getenv("TOKENCOUNT_MEASURE_LOAD"); e != "" {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c := &Counter{encoding: tokenizer.Encoding(e)}
		if err := c.Load(); err != nil {
			t.Fatal(err)
		}
		if n, err := c.codec.Count("hello world"); err != nil || n != 2 {
			t.Fatalf("Count(hello world) = %d, %v; want 2 tokens", n, err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		t.Logf("%s: the live heap grew by %.1f MiB loading the vocabulary", e, float64(grew)/(1<<20))
		if grew > vocabularyHeapBound {
			t.Errorf("%s: loading the vocabulary added %.1f MiB to the live heap, want at most %d MiB", e, float64(grew)/(1<<20), vocabularyHeapBound>>20)
		}
		runtime.KeepAlive(c)
		return
	}
	for _, e := range Encodings() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestVocabularyMemory$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "TOKENCOUNT_MEASURE_LOAD="+e)
		out, err := cmd.CombinedOutput()
		t.Logf("%s", out)
		if err != nil {
			t.Errorf("%s: %v", e, err)
		}
	}
}
