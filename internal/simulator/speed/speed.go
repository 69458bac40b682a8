// Package speed is the simulator's model of how fast a model answers: its
// time to first token and decode rate as functions of the requests in
// flight to it and of the prompt's length. It lives apart from the
// simulator, and so from Caddy, so that tests anywhere can generate
// requests from the same model on a virtual clock.
//
// The shape follows continuous-batching servers such as vLLM: each decode
// step serves every sequence in the batch, so a step takes longer as the
// batch grows and each sequence's rate falls; prefill work grows with the
// prompt; and a request queued behind a busy batch waits longer for its
// first token. The simplest curve with that shape is
//
//	slowdown(n) = 1 + k*(n-1)
//	rate(n)     = tokens_per_second / slowdown(n)
//	ttft(n, p)  = (time_to_first_token + p / prefill_tokens_per_second) * slowdown(n)
//
// for n requests in flight (the request itself included), a prompt of p
// tokens and a batch slowdown k >= 0 (k = 0: load does not matter).
package speed

import (
	"fmt"
	"math"
	"time"
)

// Curve is one model's speed.
type Curve struct {
	// TimeToFirstToken is the time to the first token alone, before
	// prefill.
	TimeToFirstToken time.Duration
	// TokensPerSecond is the decode rate alone.
	TokensPerSecond float64
	// BatchSlowdown is k: each further request in flight slows a
	// request's decode, and its wait for the first token, by k times the
	// rate alone.
	BatchSlowdown float64
	// PrefillTokensPerSecond is how many prompt tokens the model reads per
	// second before its first token, alone; 0: prefill takes no time.
	PrefillTokensPerSecond float64
}

// Validate rejects a curve that describes no speed.
func (c Curve) Validate() error {
	switch {
	case c.TimeToFirstToken < 0:
		return fmt.Errorf("time to first token %s: must not be negative", c.TimeToFirstToken)
	case !(c.TokensPerSecond > 0) || math.IsInf(c.TokensPerSecond, 0):
		return fmt.Errorf("tokens per second %v: must be a positive finite number", c.TokensPerSecond)
	case !(c.BatchSlowdown >= 0) || math.IsInf(c.BatchSlowdown, 0):
		return fmt.Errorf("batch slowdown %v: must be a non-negative finite number", c.BatchSlowdown)
	case !(c.PrefillTokensPerSecond >= 0) || math.IsInf(c.PrefillTokensPerSecond, 0):
		return fmt.Errorf("prefill tokens per second %v: must be a non-negative finite number", c.PrefillTokensPerSecond)
	}
	return nil
}

// Slowdown is the factor by which n requests in flight slow each of them
// (n < 1 counts as 1).
func (c Curve) Slowdown(n int) float64 {
	return 1 + c.BatchSlowdown*float64(max(n, 1)-1)
}

// At returns the time to first token and decode rate of a request that
// starts with inflight requests in flight (itself included) and a prompt of
// promptTokens tokens.
func (c Curve) At(inflight, promptTokens int) (ttft time.Duration, tokensPerSecond float64) {
	s := c.Slowdown(inflight)
	first := c.TimeToFirstToken.Seconds()
	if c.PrefillTokensPerSecond > 0 && promptTokens > 0 {
		first += float64(promptTokens) / c.PrefillTokensPerSecond
	}
	return time.Duration(math.Round(first * s * float64(time.Second))), c.TokensPerSecond / s
}
