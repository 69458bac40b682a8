// Package slo judges each finished request against a team's service-level
// objectives for a model: time to first token at most this, output tokens
// per second at least that, duration at most so much. The verdicts feed
// attainment and token goodput, the output tokens per second of the
// requests that met their objective, which is what a team promising its
// users a speed wants to watch, and what no single latency percentile says.
package slo

import (
	"fmt"
	"math"
	"time"

	"github.com/tokentap/tokentap/internal/glob"
	"github.com/tokentap/tokentap/internal/meter"
)

// Objective is one model's service-level objective: each set threshold
// must hold for a request to meet it. A zero threshold is not part of it.
type Objective struct {
	// TimeToFirstToken is the longest time to first token that meets.
	TimeToFirstToken time.Duration
	// OutputTokensPerSecond is the lowest output rate that meets.
	OutputTokensPerSecond float64
	// Duration is the longest whole exchange that meets.
	Duration time.Duration
}

// Empty reports whether o sets no threshold.
func (o Objective) Empty() bool {
	return o.TimeToFirstToken == 0 && o.OutputTokensPerSecond == 0 && o.Duration == 0
}

// Validate rejects an objective without a threshold, or with a negative or
// non-finite one.
func (o Objective) Validate() error {
	switch {
	case o.Empty():
		return fmt.Errorf("no threshold: set time_to_first_token, output_tokens_per_second or duration")
	case o.TimeToFirstToken < 0:
		return fmt.Errorf("time_to_first_token %v: want a positive duration", o.TimeToFirstToken)
	case o.Duration < 0:
		return fmt.Errorf("duration %v: want a positive duration", o.Duration)
	case !(o.OutputTokensPerSecond >= 0) || math.IsInf(o.OutputTokensPerSecond, 0):
		return fmt.Errorf("output_tokens_per_second %v: want a positive number", o.OutputTokensPerSecond)
	}
	return nil
}

// Verdict is what an objective made of one request.
type Verdict uint8

const (
	// NotJudged: no objective applies, or the client went away first.
	NotJudged Verdict = iota
	// Met: every threshold held.
	Met
	// Missed: some threshold did not hold, or the exchange failed.
	Missed
)

var verdictNames = [...]string{"not_judged", "met", "missed"}

// String returns "not_judged", "met" or "missed".
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("verdict(%d)", v)
}

// Judge gives m's verdict under o.
//
// A request the client abandoned is not judged: when it would have
// finished is unknown, and it was the client's choice. A request that did
// not complete (an upstream error, a stream cut short) missed: its user
// did not get an answer in time. A time to first token threshold needs a
// first token. An output rate threshold judges only requests whose rate is
// defined (tokens streamed apart in time after the first): a one-token
// answer cannot be too slow a stream, and a rate threshold must not fail
// every short classification call.
func (o Objective) Judge(m *meter.Measurement) Verdict {
	if o.Empty() || m.Outcome == meter.OutcomeClientAbort {
		return NotJudged
	}
	if m.Outcome != meter.OutcomeCompleted {
		return Missed
	}
	if o.TimeToFirstToken > 0 && (m.FirstToken <= 0 || m.FirstToken > o.TimeToFirstToken) {
		return Missed
	}
	if o.OutputTokensPerSecond > 0 {
		if r, ok := m.OutputTokensPerSecond(); ok && r < o.OutputTokensPerSecond {
			return Missed
		}
	}
	if o.Duration > 0 && m.End > o.Duration {
		return Missed
	}
	return Met
}

// Table finds a model's objective: the first pattern, in the order added,
// that matches the model's name.
type Table struct {
	rules []rule
}

type rule struct {
	pattern string
	o       Objective
}

// Add adds an objective for the models pattern matches: a name, or one
// with * standing for any run of characters; "*" matches every model.
func (t *Table) Add(pattern string, o Objective) error {
	if pattern == "" {
		return fmt.Errorf("empty model pattern")
	}
	if err := o.Validate(); err != nil {
		return fmt.Errorf("model %s: %v", pattern, err)
	}
	t.rules = append(t.rules, rule{pattern, o})
	return nil
}

// Empty reports whether the table has no objective.
func (t *Table) Empty() bool { return t == nil || len(t.rules) == 0 }

// Lookup returns model's objective.
func (t *Table) Lookup(model string) (Objective, bool) {
	if t == nil {
		return Objective{}, false
	}
	for _, r := range t.rules {
		if glob.Match(r.pattern, model) {
			return r.o, true
		}
	}
	return Objective{}, false
}
