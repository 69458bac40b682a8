package usagecheck

import (
	"fmt"
	"math/rand/v2"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/meter/tokencount"
)

// Verifier is a handler's verify_usage: the share of exchanges sampled and
// the tokenizers of the models that can be verified. It is read-only once
// made, shared by every exchange.
type Verifier struct {
	share    float64
	counters map[string]*tokencount.Counter
}

// New returns the Verifier for a share in (0, 1], with every encoding of
// the table (Encodings) loaded now, so that no sampled stream waits for a
// vocabulary; nil for share 0 (off).
func New(share float64) (*Verifier, error) {
	if share == 0 {
		return nil, nil
	}
	if !(share > 0 && share <= 1) {
		return nil, fmt.Errorf("verify_usage: share must be in (0, 1], got %v", share)
	}
	v := &Verifier{share: share, counters: map[string]*tokencount.Counter{}}
	for _, e := range Encodings() {
		c, err := tokencount.New(e)
		if err != nil {
			return nil, err
		}
		if err := c.Load(); err != nil {
			return nil, fmt.Errorf("loading tokenizer %s: %v", e, err)
		}
		v.counters[e] = c
	}
	return v, nil
}

// Sample decides whether one exchange is checked: at random, without a
// lock (math/rand/v2's top-level functions read the runtime's per-thread
// generator).
func (v *Verifier) Sample() bool {
	return v != nil && (v.share >= 1 || rand.Float64() < v.share)
}

// Checker counts one sampled exchange's answer text. Its zero value is
// not sampled; Start makes it check. It passes every fragment on to Next
// (content capture), so the two can share the meter's one TextSink.
type Checker struct {
	v *Verifier
	m *meter.Measurement
	// Next receives every fragment after the checker; nil for none.
	Next meter.TextSink

	encoding string
	counter  *tokencount.Counter
	resolved bool
	counted  int64
	// toolCalls and reasoning note output that the count cannot cover:
	// generated tokens that are not answer text.
	toolCalls, reasoning bool
	scratch              []byte
}

// Start makes c check the exchange measured into m, keeping scratch's
// memory from an earlier exchange.
func (c *Checker) Start(v *Verifier, m *meter.Measurement, next meter.TextSink) {
	*c = Checker{v: v, m: m, Next: next, scratch: c.scratch[:0]}
}

// Sampled reports whether Start was called.
func (c *Checker) Sampled() bool { return c.v != nil }

// Text implements meter.TextSink.
func (c *Checker) Text(choice, item int, kind meter.TextKind, raw string) {
	switch kind {
	case meter.TextAnswer:
		c.count(raw)
	case meter.TextReasoning:
		c.reasoning = true
	default:
		c.toolCalls = true
	}
	if c.Next != nil {
		c.Next.Text(choice, item, kind, raw)
	}
}

// count adds the tokens of one fragment of answer text. The tokenizer is
// chosen at the first fragment, by the model the response has named by
// then (OpenAI names it in every chunk, before the delta), else the one
// asked for; Result checks that the model did not change after.
func (c *Checker) count(raw string) {
	if !c.resolved {
		c.resolved = true
		c.encoding, _ = EncodingFor(modelOf(c.m))
		c.counter = c.v.counters[c.encoding]
	}
	if c.counter == nil {
		return
	}
	c.scratch = meter.AppendText(c.scratch[:0], raw)
	c.counted += c.counter.Tokens(c.scratch)
}

func modelOf(m *meter.Measurement) string {
	if m.ResponseModel != "" {
		return m.ResponseModel
	}
	return m.Request.Model
}
