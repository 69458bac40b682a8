package cost

import (
	"fmt"

	"github.com/tokentap/tokentap/internal/glob"
	"github.com/tokentap/tokentap/internal/meter"
)

// Price is one model's prices in US dollars per million tokens. The
// optional ones, nil when the model has no price of its own for them, fall
// back: cached reads and cache writes to Input, reasoning to Output.
type Price struct {
	Input, Output                    float64
	CacheRead, CacheWrite, Reasoning *float64
}

// maxPrice bounds a price, in dollars per million tokens: a thousand
// times the dearest model's, far from any real price and from float
// overflow.
const maxPrice = 1e6

// Validate rejects prices that cannot be right: negative, not finite, or
// over maxPrice.
func (p Price) Validate() error {
	for _, v := range []struct {
		name string
		v    *float64
	}{{"input", &p.Input}, {"output", &p.Output}, {"cache_read", p.CacheRead}, {"cache_write", p.CacheWrite}, {"reasoning", p.Reasoning}} {
		if v.v != nil && !(*v.v >= 0 && *v.v <= maxPrice) {
			return fmt.Errorf("%s price %v: want dollars per million tokens, from 0 to %g", v.name, *v.v, float64(maxPrice))
		}
	}
	return nil
}

// Cost is what usage u cost at p, in US dollars; ok is false when the
// input or the output count is unknown. The input count includes cached
// reads and cache writes (meter.Usage's contract), which are priced at
// their own rates; the output includes reasoning, priced apart only when
// the model prices it apart.
func (p Price) Cost(u meter.Usage) (usd float64, ok bool) {
	if u.InputTokens < 0 || u.OutputTokens < 0 {
		return 0, false
	}
	read, write := max(u.CacheReadInputTokens, 0), max(u.CacheCreationInputTokens, 0)
	plain := max(u.InputTokens-read-write, 0)
	perM := float64(plain)*p.Input + float64(read)*or(p.CacheRead, p.Input) + float64(write)*or(p.CacheWrite, p.Input)
	out := u.OutputTokens
	if p.Reasoning != nil && u.ReasoningOutputTokens > 0 {
		r := min(u.ReasoningOutputTokens, out)
		perM += float64(r) * *p.Reasoning
		out -= r
	}
	perM += float64(out) * p.Output
	return perM / 1e6, true
}

// Billed is what billed counts b cost at p, in US dollars: input at the
// Input price, output at the Output price. A provider's billed counts
// (Cohere's billed_units) already leave out the cached input and the
// system preamble, so no cache price applies; ok is false unless both
// counts are known.
func (p Price) Billed(b meter.BilledUsage) (usd float64, ok bool) {
	if !b.Known() {
		return 0, false
	}
	return (float64(b.InputTokens)*p.Input + float64(b.OutputTokens)*p.Output) / 1e6, true
}

// CostOf is what the exchange m cost at p: its billed counts where the
// provider reported both (Measurement.Billed, the bill), else its usage
// (Cost). Whether m's counts may be priced at all (reported or estimated)
// is the caller's rule.
func (p Price) CostOf(m *meter.Measurement) (usd float64, ok bool) {
	if m.Billed.Known() {
		return p.Billed(m.Billed)
	}
	return p.Cost(m.Usage)
}

// Exchange is what the exchange m, filed under model, cost at t's prices:
// model's price applied to m (Price.CostOf), plus the usage of every other
// model that sampled inside it (meter.Measurement.OtherModelUsage, such as
// Anthropic's advisor) at that model's own price. unpriced is the first
// model without a price, and then there is no cost: a bill without one of
// its parts is not the bill. ok is false, with unpriced empty, when a
// count the cost needs is unknown.
func (t *Table) Exchange(m *meter.Measurement, model string) (usd float64, ok bool, unpriced string) {
	p, found := t.Lookup(model)
	if !found {
		return 0, false, model
	}
	others := m.OtherModelUsage()
	var prices [meter.MaxOtherModels]Price
	for i, o := range others {
		if prices[i], found = t.Lookup(o.Model); !found {
			return 0, false, o.Model
		}
	}
	if usd, ok = p.CostOf(m); !ok {
		return 0, false, ""
	}
	for i, o := range others {
		c, cok := prices[i].Cost(o.Usage())
		if !cok {
			return 0, false, ""
		}
		usd += c
	}
	return usd, true, ""
}

func or(v *float64, fallback float64) float64 {
	if v != nil {
		return *v
	}
	return fallback
}

// Table finds a model's price: the patterns first, in the order they were
// added (the Caddyfile's price lines), then the pricing file's exact
// names.
type Table struct {
	patterns []pattern
	file     map[string]Price
}

type pattern struct {
	pattern string
	price   Price
}

// Add adds a price for the models that model matches: a model name, or one
// with * standing for any run of characters ("claude-sonnet-*", "*/gpt-4o").
func (t *Table) Add(model string, p Price) error {
	if model == "" {
		return fmt.Errorf("empty model pattern")
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("model %s: %v", model, err)
	}
	t.patterns = append(t.patterns, pattern{model, p})
	return nil
}

// Empty reports whether the table has no price at all.
func (t *Table) Empty() bool { return t == nil || len(t.patterns) == 0 && len(t.file) == 0 }

// Lookup returns the price of model. A pricing file's names may carry a
// provider prefix ("openai/gpt-4o", "bedrock/anthropic.claude-...") where
// the response names the model alone, so the part after the last / of a
// file's name matches too; an exact name wins over such a match.
func (t *Table) Lookup(model string) (Price, bool) {
	if t == nil || model == "" {
		return Price{}, false
	}
	for _, p := range t.patterns {
		if glob.Match(p.pattern, model) {
			return p.price, true
		}
	}
	if p, ok := t.file[model]; ok {
		return p, true
	}
	if p, ok := t.file[suffixKey+model]; ok {
		return p, true
	}
	return Price{}, false
}

// suffixKey marks the file entries indexed by the part of their name after
// the provider prefix (no model name contains a NUL byte).
const suffixKey = "\x00"
