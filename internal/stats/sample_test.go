package stats

import (
	"math"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/meter"
)

// TestSampleOf: a measurement's observed quantities become the sample's
// metrics, in seconds and tokens; what was not observed is not set.
func TestSampleOf(t *testing.T) {
	type want map[Metric]float64
	completed := *measurement()
	noToken := meter.Measurement{End: 400 * time.Millisecond, Usage: meter.Usage{InputTokens: 12, OutputTokens: 0, Source: meter.UsageReported}, Outcome: meter.OutcomeCompleted}
	failed := completed
	failed.Outcome = meter.OutcomeUpstreamError
	aborted := completed
	aborted.Outcome = meter.OutcomeClientAbort
	estimated := completed
	estimated.Usage = meter.Usage{InputTokens: -1, OutputTokens: 81, Source: meter.UsageEstimated}
	absent := completed
	absent.Usage = meter.Usage{InputTokens: -1, OutputTokens: -1, Source: meter.UsageAbsent}
	oneToken := completed
	oneToken.Usage.OutputTokens = 1
	reasoningOnly := completed
	reasoningOnly.FirstVisibleToken = 0

	tests := []struct {
		name                        string
		m                           meter.Measurement
		want                        want
		wantErr, wantAbort, wantEst bool
	}{
		{"completed stream with usage", completed, want{
			TimeToFirstToken: 0.2, TimeToFirstVisibleToken: 0.25, OutputTokensPerSecond: 40, TimePerOutputToken: 0.025,
			Duration: 2.3, InputTokens: 100, OutputTokens: 81}, false, false, false},
		{"no first token: no ttft, rate or tpot", noToken, want{Duration: 0.4, InputTokens: 12, OutputTokens: 0}, false, false, false},
		{"upstream error: no duration", failed, want{
			TimeToFirstToken: 0.2, TimeToFirstVisibleToken: 0.25, OutputTokensPerSecond: 40, TimePerOutputToken: 0.025,
			InputTokens: 100, OutputTokens: 81}, true, false, false},
		{"client abort: no duration", aborted, want{
			TimeToFirstToken: 0.2, TimeToFirstVisibleToken: 0.25, OutputTokensPerSecond: 40, TimePerOutputToken: 0.025,
			InputTokens: 100, OutputTokens: 81}, false, true, false},
		{"estimated output, unknown input", estimated, want{
			TimeToFirstToken: 0.2, TimeToFirstVisibleToken: 0.25, OutputTokensPerSecond: 40, TimePerOutputToken: 0.025,
			Duration: 2.3, OutputTokens: 81}, false, false, true},
		{"no usage at all", absent, want{TimeToFirstToken: 0.2, TimeToFirstVisibleToken: 0.25, Duration: 2.3}, false, false, false},
		{"one token: no rate", oneToken, want{TimeToFirstToken: 0.2, TimeToFirstVisibleToken: 0.25, Duration: 2.3, InputTokens: 100, OutputTokens: 1}, false, false, false},
		{"reasoning only: no visible token", reasoningOnly, want{
			TimeToFirstToken: 0.2, OutputTokensPerSecond: 40, TimePerOutputToken: 0.025,
			Duration: 2.3, InputTokens: 100, OutputTokens: 81}, false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := SampleOf(&tt.m)
			for m := Metric(0); int(m) < NumMetrics; m++ {
				got, ok := s.Get(m)
				w, want := tt.want[m]
				if ok != want || (ok && math.Abs(got-w) > 1e-9*math.Max(1, w)) {
					t.Errorf("%s = %v (observed %v), want %v (observed %v)", m, got, ok, w, want)
				}
			}
			if s.Error != tt.wantErr || s.Abort != tt.wantAbort || s.Estimated != tt.wantEst {
				t.Errorf("error %v abort %v estimated %v", s.Error, s.Abort, s.Estimated)
			}
		})
	}
}
