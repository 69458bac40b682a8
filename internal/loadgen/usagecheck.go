package loadgen

import (
	"fmt"
	"strings"
)

// UsageVsTokenizer sets the output tokens a server reported against the
// count of the same streamed text by the tokenizer tokentap has
// (Config.Tokenizer, named in Report.Tokenizer), over one model's
// completed requests that reported usage. A server that miscounts, or
// bills tokens it did not stream, shows here; so does a model whose own
// tokenizer is not the one counted with (Claude's, Llama's), and that
// difference is the tokenizers', not an error.
type UsageVsTokenizer struct {
	// Requests is how many requests were counted both ways; Differing
	// how many of them the two counts disagreed on.
	Requests  int `json:"requests"`
	Differing int `json:"differing"`
	// Cut counts the requests with usage left out because their text
	// passed the client's cap (256 KiB) on the text it keeps.
	Cut int `json:"cut,omitempty"`
	// ReportedTokens and TokenizerTokens are the two sums over Requests.
	ReportedTokens  int64 `json:"reported_tokens"`
	TokenizerTokens int64 `json:"tokenizer_tokens"`
	// Difference is (TokenizerTokens - ReportedTokens) / ReportedTokens:
	// above zero the tokenizer counted more than the server reported.
	// Absent when no token was reported.
	Difference *float64 `json:"difference,omitempty"`
}

// usageCheck accumulates one model's UsageVsTokenizer.
type usageCheck struct {
	u    UsageVsTokenizer
	seen bool // a request was counted or cut: the check ran
}

// add takes a completed request's counts, if it has both.
func (c *usageCheck) add(r *Result) {
	switch {
	case r.tokenized:
		c.seen = true
		c.u.Requests++
		c.u.ReportedTokens += int64(r.OutputTokens)
		c.u.TokenizerTokens += int64(r.TokenizerTokens)
		if r.TokenizerTokens != r.OutputTokens {
			c.u.Differing++
		}
	case r.OutputTextCut && r.OK() && r.UsageReported:
		c.seen = true
		c.u.Cut++
	}
}

// report is the comparison, or nil when no request was counted (no
// tokenizer, or no usage reported).
func (c *usageCheck) report() *UsageVsTokenizer {
	if !c.seen {
		return nil
	}
	u := c.u
	if u.ReportedTokens > 0 {
		d := float64(u.TokenizerTokens-u.ReportedTokens) / float64(u.ReportedTokens)
		u.Difference = &d
	}
	return &u
}

// usageLine is the table's line on the comparison, or "" without one.
func usageLine(rep *Report) string {
	var parts []string
	for _, m := range rep.Models {
		u := m.UsageVsTokenizer
		if u == nil {
			continue
		}
		p := fmt.Sprintf("%s: %d reported, %d counted", m.Model, u.ReportedTokens, u.TokenizerTokens)
		if u.Difference != nil {
			p += fmt.Sprintf(" (%+.1f %%)", 100**u.Difference)
		}
		p += fmt.Sprintf(", %d of %d requests differ", u.Differing, u.Requests)
		if u.Cut > 0 {
			p += fmt.Sprintf(", %d too long to count", u.Cut)
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("usage vs %s tokenizer, output tokens: %s. A model with its own tokenizer differs by the tokenizers.\n",
		rep.Tokenizer, strings.Join(parts, "; "))
}
