package ratelimit

// The headers read, by their canonical keys (http.CanonicalHeaderKey), so
// that each is one direct map lookup: the package doc names each
// provider's source.
const (
	headerRetryAfter   = "Retry-After"
	headerRetryAfterMs = "Retry-After-Ms"
)

// family is one provider's three headers of one kind.
type family struct {
	kind                    Kind
	remaining, limit, reset string
	// rfc3339 is set when the reset is a time (Anthropic), not a
	// duration (OpenAI and its followers).
	rfc3339 bool
}

// families are read in order; a kind takes its first family present.
var families = [...]family{
	// OpenAI, Azure OpenAI, Groq and the others that copy OpenAI's names.
	{Requests, "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Limit-Requests", "X-Ratelimit-Reset-Requests", false},
	{Tokens, "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Reset-Tokens", false},
	// Anthropic.
	{Requests, "Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Reset", true},
	{Tokens, "Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Tokens-Reset", true},
	{InputTokens, "Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Limit", "Anthropic-Ratelimit-Input-Tokens-Reset", true},
	{OutputTokens, "Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Limit", "Anthropic-Ratelimit-Output-Tokens-Reset", true},
}
