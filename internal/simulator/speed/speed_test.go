package speed

import (
	"testing"
	"time"
)

func TestAt(t *testing.T) {
	c := Curve{TimeToFirstToken: 100 * time.Millisecond, TokensPerSecond: 60, BatchSlowdown: 0.1, PrefillTokensPerSecond: 10000}
	tests := []struct {
		name             string
		curve            Curve
		inflight, prompt int
		ttft             time.Duration
		rate             float64
	}{
		{"alone, no prompt", c, 1, 0, 100 * time.Millisecond, 60},
		{"alone, 5000-token prompt", c, 1, 5000, 600 * time.Millisecond, 60},
		{"11 in flight: twice as slow", c, 11, 0, 200 * time.Millisecond, 30},
		{"11 in flight, 5000-token prompt", c, 11, 5000, 1200 * time.Millisecond, 30},
		{"level 0 counts as alone", c, 0, 0, 100 * time.Millisecond, 60},
		{"no slowdown, no prefill", Curve{TimeToFirstToken: time.Second, TokensPerSecond: 10}, 50, 9000, time.Second, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ttft, rate := tt.curve.At(tt.inflight, tt.prompt)
			if ttft != tt.ttft || rate != tt.rate {
				t.Errorf("At(%d, %d) = %s, %v; want %s, %v", tt.inflight, tt.prompt, ttft, rate, tt.ttft, tt.rate)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		curve Curve
		ok    bool
	}{
		{"complete", Curve{TimeToFirstToken: time.Second, TokensPerSecond: 10, BatchSlowdown: 0.2, PrefillTokensPerSecond: 1000}, true},
		{"no rate", Curve{}, false},
		{"negative ttft", Curve{TimeToFirstToken: -1, TokensPerSecond: 1}, false},
		{"negative slowdown", Curve{TokensPerSecond: 1, BatchSlowdown: -0.1}, false},
		{"negative prefill", Curve{TokensPerSecond: 1, PrefillTokensPerSecond: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.curve.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate() = %v, want ok %v", err, tt.ok)
			}
		})
	}
}
