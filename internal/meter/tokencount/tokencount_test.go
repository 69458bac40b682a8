package tokencount

import (
	"hash/maphash"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

func TestTokens(t *testing.T) {
	tests := []struct {
		name     string
		encoding string
		text     string
		want     int64
	}{
		{"empty", "o200k_base", "", 0},
		{"one word", "o200k_base", "hello", 1},
		{"word with its space", "o200k_base", " world", 1},
		{"sentence", "o200k_base", "Hello, world!", 4},
		{"non-ASCII", "o200k_base", "東京", 1},
		{"invalid UTF-8 still counts", "o200k_base", "\xff\xfe", 2},
		{"cl100k splits differently", "cl100k_base", "東京", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.encoding)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Tokens([]byte(tt.text)); got != tt.want {
				t.Errorf("Tokens(%q) = %d, want %d", tt.text, got, tt.want)
			}
		})
	}
}

// TestMatchesTokenizer checks the count against the library's own encoding
// of a longer text, so a wrapper bug (a lost byte, a wrong encoding) shows.
func TestMatchesTokenizer(t *testing.T) {
	text := strings.Repeat("Streaming throughput, measured at p50 and p95: 1,024 tokens in 11.3 s. ", 20)
	codec, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	ids, _, err := codec.Encode(text)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := New("o200k_base")
	if got := c.Tokens([]byte(text)); got != int64(len(ids)) {
		t.Errorf("Tokens = %d, the tokenizer encodes %d", got, len(ids))
	}
}

func TestNew(t *testing.T) {
	a, err := New("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := New("o200k_base")
	if a != b {
		t.Error("two Counters for one encoding: each would load its own vocabulary")
	}
	if a.Encoding() != "o200k_base" {
		t.Errorf("Encoding() = %q", a.Encoding())
	}
	if _, err := New("p50k_base"); err == nil || !strings.Contains(err.Error(), `unknown token encoding "p50k_base"`) {
		t.Errorf("unknown encoding: error %v", err)
	}
}

// TestConcurrent runs many counts at once; with -race it checks the shared
// vocabulary is only read.
func TestConcurrent(t *testing.T) {
	c, _ := New("o200k_base")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if n := c.Tokens([]byte(" tokens per second")); n != 3 {
					t.Errorf("Tokens = %d, want 3", n)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkTokens is the cost per streamed delta when a stream reports no
// usage, in steady state: one token of text, as OpenAI streams it, seen
// before by some stream.
func BenchmarkTokens(b *testing.B) {
	c, _ := New("o200k_base")
	if err := c.Load(); err != nil {
		b.Fatal(err)
	}
	delta := []byte(" throughput")
	b.ReportAllocs()
	for b.Loop() {
		c.Tokens(delta)
	}
}

// TestCachedCountsAllocateNothing: a delta seen before is counted from the
// shared table, with no allocation, and still right.
func TestCachedCountsAllocateNothing(t *testing.T) {
	c, _ := New("o200k_base")
	for _, tt := range []struct {
		name  string
		delta string
		want  int64
	}{
		{"one token", " throughput", 1},
		{"several tokens", " tokens per second", 3},
		{"non-ASCII", " 東京", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := []byte(tt.delta)
			if got := c.Tokens(b); got != tt.want {
				t.Fatalf("first count %d, want %d", got, tt.want)
			}
			if got := c.Tokens(b); got != tt.want {
				t.Fatalf("cached count %d, want %d", got, tt.want)
			}
			if allocs := testing.AllocsPerRun(100, func() { c.Tokens(b) }); allocs != 0 {
				t.Errorf("%v allocations per cached count, want 0", allocs)
			}
		})
	}
	// Long texts are not cached, and still counted right.
	long := []byte(strings.Repeat(" measured", 10))
	if got := c.Tokens(long); got != 10 {
		t.Errorf("long text: %d, want 10", got)
	}
}

// BenchmarkTokensLongDelta is a delta of many words, as buffered filters
// send: counted word by word from the shared table.
func BenchmarkTokensLongDelta(b *testing.B) {
	c, _ := New("o200k_base")
	if err := c.Load(); err != nil {
		b.Fatal(err)
	}
	delta := []byte(" a delta of a dozen words or so, as the buffered filters send them")
	b.ReportAllocs()
	for b.Loop() {
		c.Tokens(delta)
	}
}

// TestWordByWordIsExact: counting word by word gives the tokenizer's count
// of the whole text, on text of every kind (prose, code, numbers, runs of
// spaces, newlines, non-ASCII, contractions) and on random mixes of it.
func TestWordByWordIsExact(t *testing.T) {
	codec, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := New("o200k_base")
	pieces := []string{
		"Hello", " world", ",", " it's", " we'll", "  two spaces", "\n", "\n\n", " \n x", "\t tab",
		" 1,024", " tokens", "/s", " (p95)", " func", "(x int)", " {", "\n\treturn", " x", "*2", "}",
		" Température", " naïve", " 東京", " emoji 🙂", " CamelCase", " ALLCAPS", " a", "  ", "x",
		" don't", " ...", " --flag", " e.g.", " URL: https://example.com/a?b=c",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		var b strings.Builder
		for j := rng.IntN(30); j >= 0; j-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		text := b.String()
		want, _ := codec.Count(text)
		if got := c.Tokens([]byte(text)); got != int64(want) {
			t.Fatalf("Tokens(%q) = %d, the tokenizer counts %d", text, got, want)
		}
	}
}

// BenchmarkTokensFirstSight is the cost of a word no stream has sent
// before: the tokenizer itself.
func BenchmarkTokensFirstSight(b *testing.B) {
	c, _ := New("o200k_base")
	if err := c.Load(); err != nil {
		b.Fatal(err)
	}
	word := []byte(" throughputs")
	b.ReportAllocs()
	for b.Loop() {
		c.word(word)
		c.cache[maphash.Bytes(c.seed, word)%cacheSlots].Store(0)
	}
}

// BenchmarkTokensLongestDelta is the most one tokenized delta costs: the
// longest the meter hands the tokenizer (meter's maxTokenizedDelta, 4 KiB),
// as text the counter cannot split into words and so cannot find in its
// table. The meter counts on the writing goroutine after the write's flush,
// so this is how long counting can hold back the next write of a stream
// that reports no usage (docs/RELIABILITY.md, "Known limits").
func BenchmarkTokensLongestDelta(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	letters := make([]byte, 4<<10)
	for i := range letters {
		letters[i] = 'a' + byte(rng.IntN(26))
	}
	for _, bc := range []struct {
		name  string
		delta []byte
	}{
		{"one repeated character", []byte(strings.Repeat("a", 4<<10))},
		{"random letters without a space", letters},
		{"one repeated non-ASCII character", []byte(strings.Repeat("é", 2<<10))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, _ := New("o200k_base")
			if err := c.Load(); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(bc.delta)))
			b.ReportAllocs()
			for b.Loop() {
				c.Tokens(bc.delta)
			}
		})
	}
}
