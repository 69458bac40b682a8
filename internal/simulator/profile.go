package simulator

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokentap/tokentap/internal/simulator/speed"
)

// Built-in defaults of the top-level profile. They resemble a mid-sized
// hosted model so that the demo route looks plausible without any config.
const (
	DefaultTimeToFirstToken = 200 * time.Millisecond
	DefaultTokensPerSecond  = 50.0
	DefaultOutputTokens     = 64

	// MaxOutputTokens bounds the planned output so that a typo in a config
	// or a header cannot make one request allocate or stream without end.
	MaxOutputTokens = 1 << 20
)

// Profile is the speed and length of one simulated model. The handler has a
// top-level profile (its inline fields) and optional per-model profiles that
// override it field by field; a zero field means "not set" and inherits.
type Profile struct {
	// The time from the request's arrival to the first content token
	// chunk (the role-only chunk that precedes it is sent at once, as vLLM
	// does). Zero inherits the handler's value, whose default is 200ms.
	TimeToFirstToken caddy.Duration `json:"time_to_first_token,omitempty"`

	// The decode rate after the first token, in tokens per second. Zero
	// inherits the handler's value, whose default is 50.
	TokensPerSecond float64 `json:"tokens_per_second,omitempty"`

	// The relative spread of each inter-token interval: an interval is
	// 1/tokens_per_second * (1 + u) with u uniform in [-jitter, +jitter],
	// so the mean rate is unchanged. It must be in [0, 1). Zero inherits the
	// handler's value, whose default is 0 (a perfectly even stream).
	Jitter float64 `json:"jitter,omitempty"`

	// The number of output tokens generated when the request does not cap
	// it lower with max_tokens or max_completion_tokens. Zero inherits the
	// handler's value, whose default is 64.
	OutputTokens int `json:"output_tokens,omitempty"`

	// The requests per minute the simulated provider allows the model, as
	// a fixed one-minute window from its first request. Every response
	// then carries the format's rate limit headers (ratelimit.go), and a
	// request past the limit is answered 429 with retry-after, as a real
	// provider throttles. Zero inherits the handler's value, whose default
	// is none: no headers, no limit.
	RateLimitRequests int `json:"rate_limit_requests,omitempty"`
	// How much each further request in flight to the same model slows a
	// request (package speed): with n in flight, itself included, its rate
	// is tokens_per_second / (1 + batch_slowdown*(n-1)) and its time to
	// first token is multiplied by the same factor, as a continuous-
	// batching server's would. Zero inherits the handler's value, whose
	// default is 0 (load does not matter).
	BatchSlowdown float64 `json:"batch_slowdown,omitempty"`

	// How many prompt tokens the model prefills per second: the prompt
	// adds prompt_tokens / prefill_tokens_per_second to the time to first
	// token (before the load's factor). Zero inherits the handler's value,
	// whose default is 0 (the prompt's length does not matter).
	PrefillTokensPerSecond float64 `json:"prefill_tokens_per_second,omitempty"`
}

// defaultProfile is what an empty top-level profile stands for.
var defaultProfile = Profile{
	TimeToFirstToken: caddy.Duration(DefaultTimeToFirstToken),
	TokensPerSecond:  DefaultTokensPerSecond,
	OutputTokens:     DefaultOutputTokens,
}

// Overlay returns p with every set (non-zero) field of o laid over it. It is
// how a per-model profile refines the top-level one.
func (p Profile) Overlay(o Profile) Profile {
	if o.TimeToFirstToken != 0 {
		p.TimeToFirstToken = o.TimeToFirstToken
	}
	if o.TokensPerSecond != 0 {
		p.TokensPerSecond = o.TokensPerSecond
	}
	if o.Jitter != 0 {
		p.Jitter = o.Jitter
	}
	if o.OutputTokens != 0 {
		p.OutputTokens = o.OutputTokens
	}
	if o.RateLimitRequests != 0 {
		p.RateLimitRequests = o.RateLimitRequests
	}
	if o.BatchSlowdown != 0 {
		p.BatchSlowdown = o.BatchSlowdown
	}
	if o.PrefillTokensPerSecond != 0 {
		p.PrefillTokensPerSecond = o.PrefillTokensPerSecond
	}
	return p
}

// curve is p's speed curve.
func (p Profile) curve() speed.Curve {
	return speed.Curve{
		TimeToFirstToken:       time.Duration(p.TimeToFirstToken),
		TokensPerSecond:        p.TokensPerSecond,
		BatchSlowdown:          p.BatchSlowdown,
		PrefillTokensPerSecond: p.PrefillTokensPerSecond,
	}
}

// underLoad returns p with its time to first token and rate for a request
// that starts with inflight requests in flight to its model, itself
// included, and a prompt of promptTokens: unchanged when neither the load
// nor the prompt matters.
func (p Profile) underLoad(inflight, promptTokens int) Profile {
	if p.BatchSlowdown == 0 && p.PrefillTokensPerSecond == 0 {
		return p
	}
	ttft, rate := p.curve().At(inflight, promptTokens)
	p.TimeToFirstToken, p.TokensPerSecond = caddy.Duration(ttft), rate
	return p
}

// validate rejects values that cannot describe a schedule. Zero is always
// accepted because it means "inherit".
func (p Profile) validate() error {
	if p.TimeToFirstToken < 0 {
		return fmt.Errorf("time_to_first_token must not be negative, got %s", time.Duration(p.TimeToFirstToken))
	}
	if err := checkRate(p.TokensPerSecond, true); err != nil {
		return fmt.Errorf("tokens_per_second %w", err)
	}
	if err := checkJitter(p.Jitter); err != nil {
		return fmt.Errorf("jitter %w", err)
	}
	if p.OutputTokens < 0 || p.OutputTokens > MaxOutputTokens {
		return fmt.Errorf("output_tokens must be between 1 and %d, got %d", MaxOutputTokens, p.OutputTokens)
	}
	if p.RateLimitRequests < 0 {
		return fmt.Errorf("rate_limit_requests must not be negative, got %d", p.RateLimitRequests)
	}
	if err := checkRate(p.BatchSlowdown, true); err != nil {
		return fmt.Errorf("batch_slowdown %w", err)
	}
	if err := checkRate(p.PrefillTokensPerSecond, true); err != nil {
		return fmt.Errorf("prefill_tokens_per_second %w", err)
	}
	return nil
}

func checkRate(v float64, zeroOK bool) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || (v == 0 && !zeroOK) {
		return fmt.Errorf("must be a positive finite number, got %v", v)
	}
	return nil
}

func checkJitter(v float64) error {
	if math.IsNaN(v) || v < 0 || v >= 1 {
		return fmt.Errorf("must be in [0, 1), got %v", v)
	}
	return nil
}

// Offsets returns the scheduled offsets, from the request's arrival, of n
// content tokens: token 0 at the time to first token, and each later one an
// interval of 1/tokens_per_second * (1 + u) after its predecessor, with u
// drawn uniformly from [-jitter, +jitter] by rnd (rnd may be nil when the
// jitter is zero). The offsets are summed in float seconds and rounded once
// each, so that rounding error does not accumulate along a long stream.
//
// p must be complete (no zero rate): use it on a profile the handler has
// resolved, e.g. through Plan.
func (p Profile) Offsets(n int, rnd *rand.Rand) []time.Duration {
	if n <= 0 {
		return nil
	}
	offsets := make([]time.Duration, n)
	first := time.Duration(p.TimeToFirstToken)
	offsets[0] = first
	interval := 1 / p.TokensPerSecond
	elapsed := 0.0
	for i := 1; i < n; i++ {
		step := interval
		if p.Jitter > 0 && rnd != nil {
			step *= 1 + p.Jitter*(2*rnd.Float64()-1)
		}
		elapsed += step
		offsets[i] = first + time.Duration(math.Round(elapsed*float64(time.Second)))
	}
	return offsets
}
