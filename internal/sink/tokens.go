package sink

import "github.com/tokentap/tokentap/internal/meter"

// TokenKind names one of a Usage's counts.
type TokenKind int

// The token counts, in the order every sink reports them.
const (
	InputTokens TokenKind = iota
	OutputTokens
	CacheReadInputTokens
	CacheCreationInputTokens
	ReasoningOutputTokens

	// NumTokenKinds is how many kinds there are, for sinks' key tables.
	NumTokenKinds
)

// Tokens returns a count and whether it is known. Nothing is known when
// no usage was reported or estimated; a negative count is one the provider
// did not report. Sinks ask here rather than read the Usage, so that no
// sink reports a count another would leave out.
func (r *Result) Tokens(k TokenKind) (int64, bool) {
	u := &r.M.Usage
	if u.Source == meter.UsageAbsent {
		return 0, false
	}
	var n int64
	switch k {
	case InputTokens:
		n = u.InputTokens
	case OutputTokens:
		n = u.OutputTokens
	case CacheReadInputTokens:
		n = u.CacheReadInputTokens
	case CacheCreationInputTokens:
		n = u.CacheCreationInputTokens
	case ReasoningOutputTokens:
		n = u.ReasoningOutputTokens
	default:
		return 0, false
	}
	return n, n >= 0
}

// OutputTokensReported reports whether the output count came from the
// provider (asked for by the client or by inject_usage) rather than from
// tokentap's estimate. The GenAI conventions' token usage metric takes
// only those.
func (r *Result) OutputTokensReported() bool {
	s := r.M.Usage.Source
	return s == meter.UsageReported || s == meter.UsageInjected
}
