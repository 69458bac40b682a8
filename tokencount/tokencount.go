// Package tokencount counts tokens with a real byte-pair tokenizer, for the
// streams whose provider reports no usage. It wraps
// github.com/tiktoken-go/tokenizer, which embeds OpenAI's vocabularies, so
// counting needs no network and no files at run time.
package tokencount

import (
	"fmt"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// Counter counts tokens in one encoding. It implements meter.Estimator. The
// vocabulary (tens of MiB once expanded) loads on first use, not at start,
// so a process whose streams all carry usage never pays for it. A Counter is
// safe for concurrent use.
type Counter struct {
	encoding tokenizer.Encoding
	once     sync.Once
	codec    tokenizer.Codec
	err      error
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
		c = &Counter{encoding: tokenizer.Encoding(encoding)}
		counters[encoding] = c
	}
	return c, nil
}

// Encoding returns the encoding's name.
func (c *Counter) Encoding() string { return string(c.encoding) }

// Load loads the vocabulary now, so a caller can take the cost at start-up
// and see an error early. Tokens loads it anyway on first use.
func (c *Counter) Load() error {
	c.once.Do(func() { c.codec, c.err = tokenizer.Get(c.encoding) })
	return c.err
}

// Tokens returns the number of tokens in text. Text that the tokenizer
// cannot read (it fails only on internal errors) counts one token per four
// bytes, the usual rule of thumb, rather than nothing.
func (c *Counter) Tokens(text []byte) int64 {
	if len(text) == 0 {
		return 0
	}
	if c.Load() != nil {
		return int64(len(text)+3) / 4
	}
	n, err := c.codec.Count(string(text))
	if err != nil {
		return int64(len(text)+3) / 4
	}
	return int64(n)
}
