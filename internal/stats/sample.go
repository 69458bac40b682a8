package stats

import (
	"math"

	"github.com/tokentap/tokentap/internal/drift"
	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/ratelimit"
)

// Sample is what one finished request adds to its row: the metrics that
// were observed, and how the request ended. Metrics that were not observed
// (no first token, no usage, a rate that is undefined) add no point, so a
// distribution never mixes "absent" with "zero".
type Sample struct {
	values   [NumMetrics]float64
	observed [NumMetrics]bool

	// Error is set when the upstream failed (outcome upstream_error).
	Error bool
	// Abort is set when the client went away first (outcome client_abort).
	Abort bool
	// Throttled is set when the provider throttled the request (outcome
	// throttled).
	Throttled bool
	// RateLimit is what the response's headers said of the caller's rate
	// limits, when they said anything; the row keeps the latest
	// (Headroom).
	RateLimit *ratelimit.Headers
	// Estimated is set when the token counts are tokentap's estimate
	// (usage source "estimated") rather than the provider's.
	Estimated bool
	// Buffered is set when the stream arrived held back and released in
	// one burst (meter.Measurement.Buffered).
	Buffered bool
	// SLOJudged is set when an objective judged the request, SLOMet when
	// it met it; a met request's output tokens count toward the row's
	// token goodput.
	SLOJudged, SLOMet bool
	// UsageVerified is set when verify_usage compared the request's
	// reported output count (UsageReported) with its text's
	// (UsageCounted); UsageMismatch when they differed beyond tolerance.
	UsageVerified, UsageMismatch bool
	UsageReported, UsageCounted  int64
	// Inflight is the request's in-flight level: requests to the same
	// upstream and model in flight when its response began, itself
	// included; 0 when unknown (no response began), which the in-flight
	// view leaves out.
	Inflight int64
	// Drift is the slowdown detector's configuration for a row this
	// request creates (nil: drift.DefaultConfig); an existing row keeps
	// its own.
	Drift *drift.Config
}

// Set records that metric m was observed with value v.
func (s *Sample) Set(m Metric, v float64) {
	s.values[m], s.observed[m] = v, true
}

// Get returns metric m's value and whether it was observed.
func (s *Sample) Get(m Metric) (float64, bool) { return s.values[m], s.observed[m] }

// SampleOf turns a finished measurement into a Sample: times in seconds,
// rates in tokens per second, counts in tokens.
//
// The duration of a request that failed, was throttled or was abandoned
// is left out: it
// says when the failure happened, not how long the model takes, and the
// error and abort rates count those requests instead. Its other metrics
// (a first token that did arrive, the rate of the tokens that did stream)
// are real observations and are kept.
func SampleOf(m *meter.Measurement) Sample {
	var s Sample
	if m.FirstToken > 0 {
		s.Set(TimeToFirstToken, m.FirstToken.Seconds())
	}
	if m.FirstVisibleToken > 0 {
		s.Set(TimeToFirstVisibleToken, m.FirstVisibleToken.Seconds())
	}
	if r, ok := m.OutputTokensPerSecond(); ok {
		s.Set(OutputTokensPerSecond, r)
	}
	if d, ok := m.TimePerOutputToken(); ok {
		s.Set(TimePerOutputToken, d.Seconds())
	}
	switch m.Outcome {
	case meter.OutcomeUpstreamError:
		s.Error = true
	case meter.OutcomeClientAbort:
		s.Abort = true
	case meter.OutcomeThrottled:
		s.Throttled = true
	default:
		if m.End > 0 {
			s.Set(Duration, m.End.Seconds())
		}
	}
	if m.Usage.InputTokens >= 0 && m.Usage.Source != meter.UsageAbsent {
		s.Set(InputTokens, float64(m.Usage.InputTokens))
	}
	if m.Usage.OutputTokens >= 0 && m.Usage.Source != meter.UsageAbsent {
		s.Set(OutputTokens, float64(m.Usage.OutputTokens))
	}
	s.Estimated = m.Usage.Source == meter.UsageEstimated
	s.Buffered = m.Buffered
	return s
}

// The range of values a sketch takes. Zero is kept exactly (the sketch's
// zero bucket); other values outside the range, like NaN, infinities and
// negatives, are measurement faults and are dropped, which also bounds the
// bin indexes a snapshot from elsewhere may carry.
const (
	minValue = 1e-9
	maxValue = 1e12
)

// valid reports whether v can be recorded.
func valid(v float64) bool {
	return v == 0 || (v >= minValue && v <= maxValue && !math.IsNaN(v))
}
