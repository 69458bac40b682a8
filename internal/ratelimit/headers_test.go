package ratelimit

import (
	"net/http"
	"testing"
	"time"
)

// header builds an http.Header as a server's response carries it:
// canonical keys, whatever case the source wrote them in.
func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// lim is a Limit with every field known.
func lim(limit, remaining int64, reset time.Duration) Limit {
	return Limit{Limit: limit, Remaining: remaining, HasLimit: true, HasRemaining: true, Reset: reset, HasReset: true}
}

func TestRead(t *testing.T) {
	// The moment the responses below arrived, for resets given as times.
	anthropicAt := time.Date(2025, 8, 21, 12, 40, 58, 0, time.UTC)
	tests := []struct {
		name   string
		status int
		h      http.Header
		now    time.Time
		want   Headers
	}{
		{
			// source: https://platform.openai.com/docs/guides/rate-limits
			// (the sample values of its header table).
			name:   "openai documentation",
			status: 200,
			h: header(
				"x-ratelimit-limit-requests", "60",
				"x-ratelimit-limit-tokens", "150000",
				"x-ratelimit-remaining-requests", "59",
				"x-ratelimit-remaining-tokens", "149984",
				"x-ratelimit-reset-requests", "1s",
				"x-ratelimit-reset-tokens", "6m0s"),
			want: Headers{Limits: [NumKinds]Limit{
				Requests: lim(60, 59, time.Second),
				Tokens:   lim(150000, 149984, 6*time.Minute),
			}},
		},
		{
			// A real Chat Completions response's headers, as posted in
			// https://community.openai.com/t/how-to-get-rate-limit-reset-time-for-response-api/1268905
			// (the _usage_based variants are not read).
			name:   "openai recorded",
			status: 200,
			h: header(
				"x-ratelimit-limit-requests", "5000",
				"x-ratelimit-limit-tokens", "160000",
				"x-ratelimit-limit-tokens_usage_based", "160000",
				"x-ratelimit-remaining-requests", "4999",
				"x-ratelimit-remaining-tokens", "159976",
				"x-ratelimit-remaining-tokens_usage_based", "159976",
				"x-ratelimit-reset-requests", "12ms",
				"x-ratelimit-reset-tokens", "9ms",
				"x-ratelimit-reset-tokens_usage_based", "9ms"),
			want: Headers{Limits: [NumKinds]Limit{
				Requests: lim(5000, 4999, 12*time.Millisecond),
				Tokens:   lim(160000, 159976, 9*time.Millisecond),
			}},
		},
		{
			// Azure OpenAI's Responses API answering -1 for the token
			// limit it does not report, as posted in
			// https://learn.microsoft.com/en-us/answers/questions/5625878/azure-openai-responses-api-x-ratelimit-headers-val
			name:   "azure openai unreported limit",
			status: 200,
			h: header(
				"x-ratelimit-limit-tokens", "-1",
				"x-ratelimit-remaining-tokens", "-1",
				"x-ratelimit-reset-tokens", "0"),
			want: Headers{Limits: [NumKinds]Limit{
				Tokens: {HasReset: true},
			}},
		},
		{
			// Azure OpenAI's throttled answer: the remaining counts and
			// retry-after-ms (which the OpenAI SDKs read before
			// retry-after).
			name:   "azure openai throttled",
			status: 429,
			h: header(
				"x-ratelimit-remaining-requests", "0",
				"x-ratelimit-remaining-tokens", "0",
				"retry-after", "37",
				"retry-after-ms", "36500"),
			want: Headers{
				Limits: [NumKinds]Limit{
					Requests: {HasRemaining: true},
					Tokens:   {HasRemaining: true},
				},
				RetryAfter: 36500 * time.Millisecond, HasRetryAfter: true,
			},
		},
		{
			// A real Messages response's headers, recorded in tidyllm's
			// tests (tests/testthat/claude/api.anthropic.com/v1/messages-e050b5-POST.R,
			// https://rdrr.io/cran/tidyllm/src/tests/testthat/claude/api.anthropic.com/v1/messages-e050b5-POST.R;
			// only the header names and values, which are facts, are
			// used), read two seconds before its Date.
			name:   "anthropic recorded",
			status: 200,
			now:    anthropicAt,
			h: header(
				"anthropic-ratelimit-input-tokens-limit", "80000",
				"anthropic-ratelimit-input-tokens-remaining", "80000",
				"anthropic-ratelimit-input-tokens-reset", "2025-08-21T12:40:59Z",
				"anthropic-ratelimit-output-tokens-limit", "16000",
				"anthropic-ratelimit-output-tokens-remaining", "16000",
				"anthropic-ratelimit-output-tokens-reset", "2025-08-21T12:41:00Z",
				"anthropic-ratelimit-requests-limit", "1000",
				"anthropic-ratelimit-requests-remaining", "999",
				"anthropic-ratelimit-requests-reset", "2025-08-21T12:40:59Z",
				"anthropic-ratelimit-tokens-limit", "96000",
				"anthropic-ratelimit-tokens-remaining", "96000",
				"anthropic-ratelimit-tokens-reset", "2025-08-21T12:40:59Z",
				"request-id", "req_011CSLsW7mFqvHHnzrKdKjAE"),
			want: Headers{Limits: [NumKinds]Limit{
				Requests:     lim(1000, 999, time.Second),
				Tokens:       lim(96000, 96000, time.Second),
				InputTokens:  lim(80000, 80000, time.Second),
				OutputTokens: lim(16000, 16000, 2*time.Second),
			}},
		},
		{
			// Anthropic's 429: retry-after in seconds, the limit spent,
			// the reset an offset time with a fraction.
			// source: https://docs.anthropic.com/en/api/rate-limits
			name:   "anthropic throttled",
			status: 429,
			now:    anthropicAt,
			h: header(
				"anthropic-ratelimit-requests-limit", "50",
				"anthropic-ratelimit-requests-remaining", "0",
				"anthropic-ratelimit-requests-reset", "2025-08-21T14:41:28.5+02:00",
				"retry-after", "30"),
			want: Headers{
				Limits: [NumKinds]Limit{
					Requests: lim(50, 0, 30500*time.Millisecond),
				},
				RetryAfter: 30 * time.Second, HasRetryAfter: true,
			},
		},
		{
			// Anthropic overloaded (529): only retry-after.
			// source: https://docs.anthropic.com/en/api/errors
			name:   "anthropic overloaded",
			status: 529,
			h:      header("retry-after", "5"),
			want:   Headers{RetryAfter: 5 * time.Second, HasRetryAfter: true},
		},
		{
			// Groq's names are OpenAI's; its requests limit is per day,
			// its tokens limit per minute, and its resets have
			// fractions of a second.
			// source: https://console.groq.com/docs/rate-limits
			name:   "groq",
			status: 429,
			h: header(
				"x-ratelimit-limit-requests", "14400",
				"x-ratelimit-limit-tokens", "18000",
				"x-ratelimit-remaining-requests", "14370",
				"x-ratelimit-remaining-tokens", "0",
				"x-ratelimit-reset-requests", "2m59.56s",
				"x-ratelimit-reset-tokens", "7.66s",
				"retry-after", "8"),
			want: Headers{
				Limits: [NumKinds]Limit{
					Requests: lim(14400, 14370, 2*time.Minute+59560*time.Millisecond),
					Tokens:   lim(18000, 0, 7660*time.Millisecond),
				},
				RetryAfter: 8 * time.Second, HasRetryAfter: true,
			},
		},
		{
			// retry-after as an HTTP date (RFC 9110 section 10.2.3).
			name:   "retry-after date",
			status: 503,
			now:    time.Date(2026, 1, 2, 15, 4, 0, 0, time.UTC),
			h:      header("retry-after", "Fri, 02 Jan 2026 15:04:45 GMT"),
			want:   Headers{RetryAfter: 45 * time.Second, HasRetryAfter: true},
		},
		{
			// retry-after on a success says nothing of throttling.
			name:   "retry-after ignored on success",
			status: 200,
			h:      header("retry-after", "5"),
		},
		{
			name:   "malformed values cost only themselves",
			status: 429,
			h: header(
				"x-ratelimit-limit-requests", "sixty",
				"x-ratelimit-remaining-requests", "12",
				"x-ratelimit-reset-requests", "1x",
				"x-ratelimit-remaining-tokens", "1e5",
				"retry-after", "soon"),
			want: Headers{Limits: [NumKinds]Limit{
				Requests: {Remaining: 12, HasRemaining: true},
			}},
		},
		{
			name:   "nothing",
			status: 200,
			h:      header("content-type", "application/json"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Headers
			Read(tt.h, tt.status, tt.now, &got)
			want := tt.want
			if want != (Headers{}) {
				// What was read counts from the response's arrival.
				want.At = tt.now
			}
			if got != want {
				t.Errorf("Read:\n got %+v\nwant %+v", got, want)
			}
			if got.Known() != (tt.want != Headers{}) {
				t.Errorf("Known() = %v", got.Known())
			}
		})
	}
}

func TestShare(t *testing.T) {
	tests := []struct {
		name string
		l    Limit
		want float64
		ok   bool
	}{
		{"half", lim(100, 50, 0), 0.5, true},
		{"spent", lim(50, 0, 0), 0, true},
		{"rounded above the limit", lim(1000, 1001, 0), 1, true},
		{"no limit", Limit{Remaining: 5, HasRemaining: true}, 0, false},
		{"zero limit", lim(0, 0, 0), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.l.Share()
			if got != tt.want || ok != tt.ok {
				t.Errorf("Share() = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1s", time.Second, true},
		{"6m0s", 6 * time.Minute, true},
		{"20ms", 20 * time.Millisecond, true},
		{"1h2m3.5s", time.Hour + 2*time.Minute + 3500*time.Millisecond, true},
		{"250us", 250 * time.Microsecond, true},
		{"0", 0, true},
		{" 2 ", 2 * time.Second, true},
		{"", 0, false},
		{"-1s", 0, false},
		{"s", 0, false},
		{"1.s", time.Second, true}, // as time.ParseDuration reads it
		{"99999999999h", 0, false},
		{"1d", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok := duration(tt.in)
			if got != tt.want || ok != tt.ok {
				t.Errorf("duration(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
			}
			if std, err := time.ParseDuration(tt.in); err == nil && ok && std != got {
				t.Errorf("duration(%q) = %v, time.ParseDuration %v", tt.in, got, std)
			}
		})
	}
}
