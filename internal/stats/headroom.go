package stats

import (
	"fmt"
	"math"
	"time"

	"github.com/tokentap/tokentap/internal/ratelimit"
)

// Headroom is a row's latest rate limit state: what the last response
// that reported one said in its headers (package ratelimit), and when. It
// is the row's now, like its health, not the window's: the provider's
// limits are the caller's, not a distribution of requests.
type Headroom struct {
	// At is when the headers of the response that reported it arrived,
	// which its resets count from; zero when no response of the row
	// reported anything.
	At time.Time
	// Requests and Tokens are the request and token limits. Tokens is
	// the provider's combined token limit, else the tighter of its input
	// and output token limits (Anthropic reports all three).
	Requests, Tokens HeadroomLimit
	// RetryAfter is how long the provider asked the client to wait, when
	// the latest report was a throttled answer that said so.
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// HeadroomLimit is one limit's state: the remaining share and count, and
// how long after At it resets, each when known.
type HeadroomLimit struct {
	Share        float64
	HasShare     bool
	Remaining    int64
	HasRemaining bool
	Reset        time.Duration
	HasReset     bool
}

// known reports whether anything of the limit is known.
func (l *HeadroomLimit) known() bool { return l.HasShare || l.HasRemaining || l.HasReset }

func headroomLimit(l *ratelimit.Limit) HeadroomLimit {
	out := HeadroomLimit{Remaining: l.Remaining, HasRemaining: l.HasRemaining, Reset: l.Reset, HasReset: l.HasReset}
	out.Share, out.HasShare = l.Share()
	return out
}

// note takes what a response reported, at rl.At, else end. A report with
// limits replaces the row's (and its retry-after: the newer answer says
// whether to wait); one with only a retry-after (a 529 says nothing of
// limits) keeps the limits known and adds the wait. Called under the
// row's lock; it allocates nothing.
func (h *Headroom) note(rl *ratelimit.Headers, end time.Time) {
	if !rl.Known() {
		return
	}
	lim := &rl.Limits
	tokens := &lim[ratelimit.Tokens]
	if !tokens.Known() {
		// The tighter of the input and output limits.
		in, out := &lim[ratelimit.InputTokens], &lim[ratelimit.OutputTokens]
		si, iok := in.Share()
		so, ook := out.Share()
		switch {
		case iok && ook && so < si, !iok && out.Known():
			tokens = out
		default:
			tokens = in
		}
	}
	requests := headroomLimit(&lim[ratelimit.Requests])
	tok := headroomLimit(tokens)
	if requests.known() || tok.known() {
		h.Requests, h.Tokens = requests, tok
	}
	at := rl.At
	if at.IsZero() {
		at = end
	}
	h.At, h.RetryAfter, h.HasRetryAfter = at, rl.RetryAfter, rl.HasRetryAfter
}

// RateLimitReport is a row's Headroom in the JSON.
type RateLimitReport struct {
	// ObservedAt is when the headers of the response that reported it
	// arrived.
	ObservedAt time.Time `json:"observed_at"`
	// Requests and Tokens are the two limits, each absent when unknown.
	Requests *RateLimitKind `json:"requests,omitempty"`
	Tokens   *RateLimitKind `json:"tokens,omitempty"`
	// RetryAfterSeconds is how long the provider asked the client to
	// wait after ObservedAt, when the latest report was a throttled
	// answer that said so.
	RetryAfterSeconds *float64 `json:"retry_after_seconds,omitempty"`
}

// RateLimitKind is one limit in the JSON, each field absent when
// unknown.
type RateLimitKind struct {
	// RemainingShare is remaining over the limit, 0 to 1.
	RemainingShare *float64 `json:"remaining_share,omitempty"`
	Remaining      *int64   `json:"remaining,omitempty"`
	// ResetSeconds is how long after ObservedAt the limit is whole
	// again.
	ResetSeconds *float64 `json:"reset_seconds,omitempty"`
}

// rateLimitReport is h in the JSON; nil when nothing was reported.
func rateLimitReport(h *Headroom) *RateLimitReport {
	if h.At.IsZero() {
		return nil
	}
	out := &RateLimitReport{ObservedAt: h.At.UTC(), Requests: rateLimitKind(&h.Requests), Tokens: rateLimitKind(&h.Tokens)}
	if h.HasRetryAfter {
		v := round(h.RetryAfter.Seconds())
		out.RetryAfterSeconds = &v
	}
	return out
}

func rateLimitKind(l *HeadroomLimit) *RateLimitKind {
	if !l.known() {
		return nil
	}
	var k RateLimitKind
	if l.HasShare {
		v := round(l.Share)
		k.RemainingShare = &v
	}
	if l.HasRemaining {
		v := l.Remaining
		k.Remaining = &v
	}
	if l.HasReset {
		v := round(l.Reset.Seconds())
		k.ResetSeconds = &v
	}
	return &k
}

// headroom reads a RateLimitReport from another instance back, checking
// its values: shares within 0 to 1, no negative count or time.
func (r *RateLimitReport) headroom() (Headroom, error) {
	h := Headroom{At: r.ObservedAt}
	if h.At.IsZero() {
		return Headroom{}, fmt.Errorf("no observed_at")
	}
	var err error
	if h.Requests, err = r.Requests.limit(); err != nil {
		return Headroom{}, fmt.Errorf("requests: %v", err)
	}
	if h.Tokens, err = r.Tokens.limit(); err != nil {
		return Headroom{}, fmt.Errorf("tokens: %v", err)
	}
	if r.RetryAfterSeconds != nil {
		if h.RetryAfter, err = seconds(*r.RetryAfterSeconds); err != nil {
			return Headroom{}, fmt.Errorf("retry_after_seconds: %v", err)
		}
		h.HasRetryAfter = true
	}
	return h, nil
}

func (k *RateLimitKind) limit() (HeadroomLimit, error) {
	var l HeadroomLimit
	if k == nil {
		return l, nil
	}
	if k.RemainingShare != nil {
		v := *k.RemainingShare
		if !(v >= 0 && v <= 1) {
			return l, fmt.Errorf("remaining_share %v: want 0 to 1", v)
		}
		l.Share, l.HasShare = v, true
	}
	if k.Remaining != nil {
		if *k.Remaining < 0 {
			return l, fmt.Errorf("remaining %d: negative", *k.Remaining)
		}
		l.Remaining, l.HasRemaining = *k.Remaining, true
	}
	if k.ResetSeconds != nil {
		d, err := seconds(*k.ResetSeconds)
		if err != nil {
			return l, fmt.Errorf("reset_seconds: %v", err)
		}
		l.Reset, l.HasReset = d, true
	}
	return l, nil
}

// seconds reads a non-negative number of seconds, at most a year.
func seconds(v float64) (time.Duration, error) {
	const year = 365 * 24 * 3600
	if !(v >= 0 && v <= year) || math.IsNaN(v) {
		return 0, fmt.Errorf("%v: want 0 to %d", v, year)
	}
	return time.Duration(v * float64(time.Second)), nil
}
