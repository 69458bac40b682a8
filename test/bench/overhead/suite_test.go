package main

import (
	"strings"
	"testing"
	"time"
)

func TestSuiteCellSustained(t *testing.T) {
	tests := []struct {
		name string
		cell suiteCell
		want bool
	}{
		{"every stream whole and on time", suiteCell{Concurrency: 64, Streams: 64}, true},
		{"a stream missing", suiteCell{Concurrency: 64, Streams: 63}, false},
		{"a frame missing", suiteCell{Concurrency: 64, Streams: 64, Incomplete: 1}, false},
		{"a stall", suiteCell{Concurrency: 64, Streams: 64, Stalled: 1}, false},
		{"one failure in 64 is over 0.1 %", suiteCell{Concurrency: 64, Streams: 64, Failed: 1}, false},
		{"no failure at 512", suiteCell{Concurrency: 512, Streams: 512}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cell.sustained(); got != tc.want {
				t.Errorf("sustained() = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestSuitePath: added figures are the path's quantile minus the direct
// line's, in µs, and the direct line has none.
func TestSuitePath(t *testing.T) {
	us := func(v ...int) []int64 {
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = int64(x) * int64(time.Microsecond)
		}
		return out
	}
	direct := &suiteSamples{first: us(20100, 20200, 20300), gaps: us(20000, 20010, 20500), plain: us(300, 310, 900)}
	proxied := &suiteSamples{first: us(20400, 20500, 20900), gaps: us(20005, 20020, 20800), plain: us(500, 520, 1400),
		idle: []int64{30 << 20, 31 << 20, 30 << 20}}
	d := direct.path("direct", direct, 64, 3000)
	if d.AddedFirstP50us != nil || d.AddedGapP99us != nil || d.IdleMiB != nil {
		t.Errorf("the direct line has added figures or memory: %+v", d)
	}
	p := proxied.path("caddy", direct, 32, 1500)
	for name, got := range map[string]*float64{
		"added first p50": p.AddedFirstP50us, "added first p99": p.AddedFirstP99us,
		"added gap p50": p.AddedGapP50us, "added gap p99": p.AddedGapP99us, "added plain p99": p.AddedPlainP99us,
	} {
		want := map[string]float64{"added first p50": 300, "added first p99": 600, "added gap p50": 10, "added gap p99": 300, "added plain p99": 500}[name]
		if got == nil || *got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if p.IdleMiB == nil || *p.IdleMiB != 30 {
		t.Errorf("idle = %v MiB, want the median 30", p.IdleMiB)
	}
	if p.Sustained != 32 || p.FramesPerSecond != 1500 {
		t.Errorf("sustained %d at %v frames/s, want 32 at 1500", p.Sustained, p.FramesPerSecond)
	}
}

func TestSuiteOptions(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // "" for no error
	}{
		{"the suite", []string{"--suite", "stream"}, ""},
		{"another suite", []string{"--suite", "chat"}, "the one suite is stream"},
		{"with --compare", []string{"--suite", "stream", "--compare", "/tmp/x"}, "runs only the suite"},
		{"sweep too high", []string{"--suite", "stream", "--suite-max", "1024"}, "suite-max 1-512"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseOptions(tc.args)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if top := sweepTop(100); top != 64 {
		t.Errorf("sweepTop(100) = %d, want 64", top)
	}
}
