package ratelimit

import (
	"net/http"
	"time"
)

// Kind is one kind of limit a provider reports.
type Kind uint8

const (
	Requests Kind = iota
	Tokens
	InputTokens
	OutputTokens
	// NumKinds is the number of kinds.
	NumKinds
)

var kindNames = [NumKinds]string{"requests", "tokens", "input_tokens", "output_tokens"}

// String is the kind's name in telemetry (tokentap.ratelimit.<kind>.*).
func (k Kind) String() string {
	if k < NumKinds {
		return kindNames[k]
	}
	return "unknown"
}

// Limit is one kind's state as the response reported it. A field is
// meaningful only when its Has flag is set: a provider may send the
// remaining count without the limit, or a limit of -1 for none.
type Limit struct {
	Limit, Remaining       int64
	HasLimit, HasRemaining bool
	// Reset is how long after the response the limit is whole again.
	Reset    time.Duration
	HasReset bool
}

// Known reports whether anything of the kind was reported.
func (l *Limit) Known() bool { return l.HasLimit || l.HasRemaining || l.HasReset }

// Share is the remaining share of the limit, remaining/limit, when both
// are known and the limit is positive; capped at 1, since a provider may
// round the two apart.
func (l *Limit) Share() (float64, bool) {
	if !l.HasLimit || !l.HasRemaining || l.Limit <= 0 {
		return 0, false
	}
	return min(float64(l.Remaining)/float64(l.Limit), 1), true
}

// Headers is what one response's headers say of its rate limits. It is a
// fixed-size value, so that reading it allocates nothing.
type Headers struct {
	Limits [NumKinds]Limit
	// RetryAfter is how long the provider asked the client to wait, from
	// the response, when HasRetryAfter.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// At is when the response's headers arrived, which the resets and
	// the wait count from; zero when nothing was read.
	At time.Time
}

// Known reports whether the response reported anything.
func (h *Headers) Known() bool {
	if h.HasRetryAfter {
		return true
	}
	for i := range h.Limits {
		if h.Limits[i].Known() {
			return true
		}
	}
	return false
}

// Read reads h's rate limit headers into into (which it resets), for a
// response of status that arrived at now. Values it cannot read are left
// unknown: a malformed header costs its own value and nothing else.
func Read(h http.Header, status int, now time.Time, into *Headers) {
	*into = Headers{}
	for i := range families {
		f := &families[i]
		rem, ok := h[f.remaining]
		if !ok {
			// A kind is read when its remaining count is there: every
			// provider above sends it with the others.
			continue
		}
		l := &into.Limits[f.kind]
		if l.HasRemaining {
			// An earlier family reported the kind already.
			continue
		}
		l.Remaining, l.HasRemaining = count(rem)
		l.Limit, l.HasLimit = count(h[f.limit])
		if v := h[f.reset]; len(v) > 0 {
			if f.rfc3339 {
				l.Reset, l.HasReset = untilRFC3339(v[0], now)
			} else {
				l.Reset, l.HasReset = duration(v[0])
			}
		}
	}
	if waits(status) {
		into.RetryAfter, into.HasRetryAfter = retryAfter(h, now)
	}
	if into.Known() {
		into.At = now
	}
}

// waits reports whether a response of status may ask the client to wait:
// too many requests, unavailable, and Anthropic's overloaded.
func waits(status int) bool {
	return status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable || status == StatusOverloaded
}

// StatusOverloaded is Anthropic's status for an overloaded API.
// source: https://docs.anthropic.com/en/api/errors
const StatusOverloaded = 529

// retryAfter reads retry-after-ms, else retry-after.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h[headerRetryAfterMs]; len(v) > 0 {
		if ms, ok := decimal(v[0], time.Millisecond); ok {
			return ms, true
		}
	}
	v := h[headerRetryAfter]
	if len(v) == 0 {
		return 0, false
	}
	if d, ok := decimal(v[0], time.Second); ok {
		return d, true
	}
	// An HTTP date: rare, and only on a throttled answer.
	t, err := http.ParseTime(v[0])
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d > maxDuration {
		return 0, false
	}
	return max(d, 0), true
}

// count reads a header's non-negative integer; a negative one (Azure's
// -1) or any other text is unknown.
func count(v []string) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	s := trim(v[0])
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// trim removes the spaces and tabs around s.
func trim(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
