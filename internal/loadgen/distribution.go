package loadgen

// CDFProbabilities are the probabilities at which a Distribution gives a
// measure's value: 5 % steps through the body, enough for a smooth CDF
// curve, and closer steps in the tails (1 %, 2.5 %, 97.5 %, 99 %, 99.9 %),
// where latency objectives are set and where models that share a median
// differ; 0 and 1 are the smallest and largest sample, the curve's ends.
// Each value is within the sketch's relative accuracy (0.5 %), and 26
// points per measure keep a report small whatever the number of requests.
var CDFProbabilities = []float64{
	0, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
	0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.975, 0.99, 0.999, 1,
}

// Distribution is a model's time to first token and output tokens/s as
// cumulative distributions, for charts: the share P of completed requests
// whose value was at most Value. A measure without samples has no points.
type Distribution struct {
	// TimeToFirstToken is in seconds, OutputTokensPerSecond in tokens per
	// second after the first token; the samples are those of the
	// ModelReport's quantiles of the same names.
	TimeToFirstToken      []CDFPoint `json:"time_to_first_token_seconds,omitempty"`
	OutputTokensPerSecond []CDFPoint `json:"output_tokens_per_second,omitempty"`
}

// CDFPoint is one point of a cumulative distribution: P of the samples
// (a share, 0 to 1) were at most Value.
type CDFPoint struct {
	P     float64 `json:"p"`
	Value float64 `json:"value"`
}

// cdf is s's values at CDFProbabilities, or nil without samples.
func (s *series) cdf() []CDFPoint {
	if s.s.GetCount() == 0 {
		return nil
	}
	vs, err := s.s.GetValuesAtQuantiles(CDFProbabilities)
	if err != nil {
		return nil // not reached: the sketch has samples and the probabilities are in [0, 1]
	}
	out := make([]CDFPoint, len(vs))
	for i, v := range vs {
		out[i] = CDFPoint{P: CDFProbabilities[i], Value: v}
	}
	return out
}

// distribution is m's Distribution, or nil when no request completed with
// a time to first token or a rate.
func (m *modelStats) distribution() *Distribution {
	d := &Distribution{TimeToFirstToken: m.ttft.cdf(), OutputTokensPerSecond: m.tps.cdf()}
	if d.TimeToFirstToken == nil && d.OutputTokensPerSecond == nil {
		return nil
	}
	return d
}
