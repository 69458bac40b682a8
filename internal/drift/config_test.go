package drift

import (
	"math"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		c    Config
		// err is a substring of the error, "" for none.
		err string
	}{
		{"zero is the defaults", Config{}, ""},
		{"defaults spelled out", DefaultConfig, ""},
		{"one field changed", Config{RateDrop: 0.2}, ""},
		{"small windows", Config{Baseline: 16, MinBaseline: 8, Lag: 4, Current: 4, MinRun: 2}, ""},
		{"min_baseline defaults to at most baseline", Config{Baseline: 32}, ""},
		{"rate drop of 100 %", Config{RateDrop: 1}, "rate_drop"},
		{"negative rate drop", Config{RateDrop: -0.3}, "rate_drop"},
		{"NaN rate drop", Config{RateDrop: math.NaN()}, "rate_drop"},
		{"negative ttft rise", Config{TTFTRise: -0.5}, "ttft_rise"},
		{"infinite ttft rise", Config{TTFTRise: math.Inf(1)}, "ttft_rise"},
		{"evidence too small to mean anything", Config{Evidence: 1}, "evidence"},
		{"NaN evidence", Config{Evidence: math.NaN()}, "evidence"},
		{"negative min run", Config{MinRun: -1}, "min_run"},
		{"baseline beyond its array", Config{Baseline: MaxBaseline + 1}, "baseline"},
		{"tiny baseline", Config{Baseline: 8}, "baseline"},
		{"min baseline above baseline", Config{Baseline: 32, MinBaseline: 64}, "min_baseline"},
		{"lag beyond its array", Config{Lag: MaxLag + 1}, "lag"},
		{"lag shorter than min run", Config{Lag: 2, MinRun: 3, Current: 1}, "lag"},
		{"current beyond lag", Config{Lag: 8, Current: 9}, "current"},
		{"negative current", Config{Current: -1}, "current"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("Validate() = %v, want an error naming %q", err, tt.err)
			}
			if _, nerr := New(tt.c); (nerr == nil) != (err == nil) {
				t.Errorf("New error %v disagrees with Validate %v", nerr, err)
			}
		})
	}
}

func TestWithDefaults(t *testing.T) {
	tests := []struct {
		name string
		c    Config
		want Config
	}{
		{"zero", Config{}, DefaultConfig},
		{"keeps a set field", Config{TTFTRise: 1}, func() Config { c := DefaultConfig; c.TTFTRise = 1; return c }()},
		{"min baseline follows a smaller baseline", Config{Baseline: 32},
			func() Config { c := DefaultConfig; c.Baseline, c.MinBaseline = 32, 32; return c }()},
		{"current follows a smaller lag", Config{Lag: 4},
			func() Config { c := DefaultConfig; c.Lag, c.Current = 4, 4; return c }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.withDefaults(); got != tt.want {
				t.Errorf("withDefaults() = %+v, want %+v", got, tt.want)
			}
		})
	}
}
