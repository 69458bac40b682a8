// Package tokencount counts tokens with a real byte-pair tokenizer, for the
// streams whose provider reports no usage. It wraps
// github.com/tiktoken-go/tokenizer, which embeds OpenAI's vocabularies, so
// counting needs no network and no files at run time.
package tokencount

import (
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/tiktoken-go/tokenizer"
	"github.com/tiktoken-go/tokenizer/codec"
)

// Streams deliver a token or a few per delta, and the same short deltas
// (" the", ",", " and") recur across every stream, so counts of short texts
// are remembered in a fixed table shared by all requests. Each slot is one
// atomic word: the high bits of the text's hash and the count. Reads and
// writes are single atomic operations, no lock, no allocation; two texts
// that share a slot just overwrite each other, and a false match needs a
// 40-bit hash collision on top of a slot collision.
const (
	cacheSlots    = 1 << 16
	cacheMaxText  = 48
	cacheCountBit = 24
	cacheCountMax = 1<<cacheCountBit - 1
)

// Counter counts tokens in one encoding. It implements meter.Estimator. The
// vocabulary loads on Load or on first use, once per process, so a caller
// chooses when to pay for it (TestVocabularyMemory bounds its heap). A
// Counter is safe for concurrent use.
type Counter struct {
	encoding tokenizer.Encoding
	once     sync.Once
	codec    tokenizer.Codec
	err      error
	seed     maphash.Seed
	cache    []atomic.Uint64
}

// Encodings lists the encodings New accepts.
func Encodings() []string {
	return []string{string(tokenizer.O200kBase), string(tokenizer.Cl100kBase)}
}

var (
	countersMu sync.Mutex
	counters   = map[string]*Counter{}
)

// New returns the process-wide Counter for an encoding ("o200k_base", what
// current OpenAI models use, or "cl100k_base"), so every handler and every
// config reload shares one vocabulary.
func New(encoding string) (*Counter, error) {
	known := false
	for _, e := range Encodings() {
		known = known || e == encoding
	}
	if !known {
		return nil, fmt.Errorf("unknown token encoding %q (known: %v)", encoding, Encodings())
	}
	countersMu.Lock()
	defer countersMu.Unlock()
	c := counters[encoding]
	if c == nil {
		c = &Counter{encoding: tokenizer.Encoding(encoding), seed: maphash.MakeSeed(), cache: make([]atomic.Uint64, cacheSlots)}
		counters[encoding] = c
	}
	return c, nil
}

// Encoding returns the encoding's name.
func (c *Counter) Encoding() string { return string(c.encoding) }

// Load loads the vocabulary now, so a caller can take the cost at start-up
// and see an error early. Tokens loads it anyway on first use.
func (c *Counter) Load() error {
	c.once.Do(func() { c.codec, c.err = newCodec(c.encoding) })
	return c.err
}

// newCodec builds the codec of one of Encodings. It names the two
// constructors rather than calling tokenizer.Get, whose switch over every
// encoding links all five vocabularies into the binary, the three tokentap
// does not offer included (docs/BENCHMARKS.md, "Binary size").
func newCodec(e tokenizer.Encoding) (tokenizer.Codec, error) {
	switch e {
	case tokenizer.O200kBase:
		return codec.NewO200kBase(), nil
	case tokenizer.Cl100kBase:
		return codec.NewCl100kBase(), nil
	}
	return nil, fmt.Errorf("unknown token encoding %q (known: %v)", e, Encodings())
}

// Tokens returns the number of tokens in text. Text that the tokenizer
// cannot read (it fails only on internal errors) counts one token per four
// bytes, the usual rule of thumb, rather than nothing.
//
// The text is counted word by word: the encodings' pre-tokenizer always
// starts a new piece at a space followed by a letter (after a character that
// is not a space), and byte-pair merges never cross pieces, so the counts of
// the words add up to the count of the text. Words are short and recur, so
// they are nearly always in the shared table; and the tokenizer's matching,
// which grows faster than the text, only ever sees one word.
func (c *Counter) Tokens(text []byte) int64 {
	var n int64
	start := 0
	for i := 1; i+1 < len(text); i++ {
		if text[i] == ' ' && isLetter(text[i+1]) && !isSpace(text[i-1]) {
			n += c.word(text[start:i])
			start = i
		}
	}
	return n + c.word(text[start:])
}

// word counts one piece of text, from the shared table when it is there.
func (c *Counter) word(text []byte) int64 {
	if len(text) == 0 {
		return 0
	}
	var h uint64
	var slot *atomic.Uint64
	if len(text) <= cacheMaxText {
		h = maphash.Bytes(c.seed, text)
		slot = &c.cache[h%cacheSlots]
		if v := slot.Load(); v != 0 && v>>cacheCountBit == h>>cacheCountBit {
			return int64(v & cacheCountMax)
		}
	}
	if c.Load() != nil {
		return int64(len(text)+3) / 4
	}
	n, err := c.codec.Count(string(text))
	if err != nil {
		return int64(len(text)+3) / 4
	}
	if slot != nil && n > 0 && n <= cacheCountMax {
		slot.Store(h>>cacheCountBit<<cacheCountBit | uint64(n))
	}
	return int64(n)
}

func isLetter(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
