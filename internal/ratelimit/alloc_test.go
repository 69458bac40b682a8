package ratelimit

import (
	"net/http"
	"testing"
	"time"
)

// responses are header sets of each family, as providers send them.
var responses = []struct {
	name   string
	status int
	h      http.Header
}{
	{"none", 200, header("Content-Type", "text/event-stream", "X-Request-Id", "req_1")},
	{"openai", 200, header(
		"x-ratelimit-limit-requests", "5000", "x-ratelimit-limit-tokens", "160000",
		"x-ratelimit-remaining-requests", "4999", "x-ratelimit-remaining-tokens", "159976",
		"x-ratelimit-reset-requests", "12ms", "x-ratelimit-reset-tokens", "6m0s")},
	{"anthropic", 200, header(
		"anthropic-ratelimit-requests-limit", "1000", "anthropic-ratelimit-requests-remaining", "999",
		"anthropic-ratelimit-requests-reset", "2025-08-21T12:40:59Z",
		"anthropic-ratelimit-tokens-limit", "96000", "anthropic-ratelimit-tokens-remaining", "96000",
		"anthropic-ratelimit-tokens-reset", "2025-08-21T12:40:59Z",
		"anthropic-ratelimit-input-tokens-limit", "80000", "anthropic-ratelimit-input-tokens-remaining", "80000",
		"anthropic-ratelimit-input-tokens-reset", "2025-08-21T12:40:59Z",
		"anthropic-ratelimit-output-tokens-limit", "16000", "anthropic-ratelimit-output-tokens-remaining", "16000",
		"anthropic-ratelimit-output-tokens-reset", "2025-08-21T12:41:00Z")},
	{"throttled", 429, header(
		"x-ratelimit-remaining-requests", "0", "x-ratelimit-remaining-tokens", "0",
		"retry-after", "37", "retry-after-ms", "36500")},
}

// TestReadAllocs holds the rule that reading a response's rate limits
// allocates nothing, whichever provider's headers it carries.
func TestReadAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	now := time.Date(2025, 8, 21, 12, 40, 0, 0, time.UTC)
	for _, r := range responses {
		t.Run(r.name, func(t *testing.T) {
			var got Headers
			if n := testing.AllocsPerRun(100, func() { Read(r.h, r.status, now, &got) }); n != 0 {
				t.Errorf("Read allocates %v times per response, want 0", n)
			}
		})
	}
}

// BenchmarkRead is the cost of reading one response's rate limits.
func BenchmarkRead(b *testing.B) {
	now := time.Date(2025, 8, 21, 12, 40, 0, 0, time.UTC)
	for _, r := range responses {
		b.Run(r.name, func(b *testing.B) {
			var got Headers
			b.ReportAllocs()
			for b.Loop() {
				Read(r.h, r.status, now, &got)
			}
		})
	}
}
