package drift

import (
	"math"
	"testing"
	"time"
)

// t0 is the clock of the tests' requests: request i ends at t0 + i s.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }

// warm is the number of requests carrying a signal that a default
// detector needs before judging it.
var warm = DefaultConfig.Lag + DefaultConfig.MinBaseline

// both is a request carrying both signals.
func both(i int, rate, ttft float64) Sample {
	return Sample{At: at(i), Rate: rate, RateOK: true, TTFT: ttft, TTFTOK: true}
}

func TestStateString(t *testing.T) {
	tests := []struct {
		s    State
		want string
	}{
		{InsufficientData, "insufficient_data"},
		{OK, "ok"},
		{Slow, "slow"},
		{State(9), "state(9)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.s.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if b, _ := tt.s.MarshalText(); string(b) != tt.want {
				t.Errorf("MarshalText() = %q, want %q", b, tt.want)
			}
		})
	}
}

// TestNoiseless steps a row without noise: every request of a step is
// the same, so the test's arithmetic is exact. The spread is then its
// floor (delta/8) and each request beyond the line gives the most one
// request may, Evidence/MinRun: a flag takes exactly MinRun requests.
func TestNoiseless(t *testing.T) {
	run := DefaultConfig.MinRun
	tests := []struct {
		name       string
		rate, ttft float64 // factors on 50 tokens/s and 0.5 s
		// flagAt is the request of the step that raises the flag, 0 for
		// none in 2,000.
		flagAt int
	}{
		{"rate -30 %", 0.7, 1, run},
		{"rate -50 %", 0.5, 1, run},
		{"rate -20 %, beyond the line (-17.8 %)", 0.8, 1, run},
		{"rate -15 %, inside the line", 0.85, 1, 0},
		{"rate -10 %", 0.9, 1, 0},
		{"rate +50 % is not slow", 1.5, 1, 0},
		{"ttft +50 %", 1, 1.5, run},
		{"ttft +30 %, beyond the line (+25 %)", 1, 1.3, run},
		{"ttft +20 %, inside the line", 1, 1.2, 0},
		{"ttft halved is not slow", 1, 0.5, 0},
		{"both", 0.7, 1.5, run},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Detector
			for i := range warm {
				d.Observe(both(i, 50, 0.5))
			}
			if s := d.Health().State; s != OK {
				t.Fatalf("after %d steady requests: %v, want ok", warm, s)
			}
			flagAt := 0
			for i := 1; i <= 2000 && flagAt == 0; i++ {
				d.Observe(both(warm+i, 50*tt.rate, 0.5*tt.ttft))
				if d.Health().State == Slow {
					flagAt = i
				}
			}
			if flagAt != tt.flagAt {
				t.Fatalf("flagged at request %d of the step, want %d (0: never)", flagAt, tt.flagAt)
			}
			if flagAt == 0 {
				return
			}
			// Back to the baseline, the clearing test is as quick.
			for i := 1; i <= run; i++ {
				if s := d.Health().State; s != Slow {
					t.Fatalf("cleared after %d recovered requests, want %d", i-1, run)
				}
				d.Observe(both(warm+flagAt+i, 50, 0.5))
			}
			if s := d.Health().State; s != OK {
				t.Errorf("after %d recovered requests: %v, want ok", run, s)
			}
		})
	}
}

// TestHealth checks the verdict's fields through a noiseless slowdown:
// the reason's words and figures, since, and Observe's changed.
func TestHealth(t *testing.T) {
	type step struct {
		n          int     // requests
		rate, ttft float64 // values; 0 leaves the signal out
		state      State
		reason     string // exact
		// sinceAt is the request (counting from 1) that entered state.
		sinceAt int
	}
	tests := []struct {
		name string
		// changes is how many times Observe should report a change.
		changes int
		steps   []step
	}{
		{"warm-up, ok, slow rate, ok", 3, []step{
			{1, 50, 0.5, InsufficientData, "a baseline needs 96 requests with output tokens/s or time to first token; the row has 1 and 1", 1},
			{warm - 2, 50, 0.5, InsufficientData, "a baseline needs 96 requests with output tokens/s or time to first token; the row has 95 and 95", 1},
			{1, 50, 0.5, OK, "output tokens/s and time to first token within thresholds of the baseline", warm},
			{20, 35, 0.5, Slow, "p50 output tokens/s 35.0, 30 % below its baseline of 50.0", warm + 3},
			{20, 50, 0.5, OK, "output tokens/s and time to first token within thresholds of the baseline", warm + 23},
		}},
		{"slow time to first token, then both", 3, []step{
			{warm, 1200, 0.5, OK, "output tokens/s and time to first token within thresholds of the baseline", warm},
			{10, 1200, 0.8, Slow, "p50 time to first token 0.800 s, 60 % above its baseline of 0.500 s", warm + 3},
			{10, 600, 0.8, Slow, "p50 output tokens/s 600, 50 % below its baseline of 1200; p50 time to first token 0.800 s, 60 % above its baseline of 0.500 s", warm + 3},
		}},
		{"only time to first token (errored requests)", 2, []step{
			{warm, 0, 2.5, OK, "time to first token within thresholds of the baseline", warm},
			{5, 0, 5, Slow, "p50 time to first token 5.00 s, 100 % above its baseline of 2.50 s", warm + 3},
		}},
		{"neither signal (not streamed)", 0, []step{
			{500, 0, 0, InsufficientData, "a baseline needs 96 requests with output tokens/s or time to first token; the row has 0 and 0", 1},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Detector
			i, changes := 0, 0
			for _, s := range tt.steps {
				for range s.n {
					i++
					smp := Sample{At: at(i), Rate: s.rate, RateOK: s.rate != 0, TTFT: s.ttft, TTFTOK: s.ttft != 0}
					before := d.Health()
					if d.Observe(smp) {
						changes++
						after := d.Health()
						if after.State == before.State && after.Reason == before.Reason {
							t.Errorf("request %d: changed, but the health is the same: %+v", i, after)
						}
					}
				}
				h := d.Health()
				if h.State != s.state || h.Reason != s.reason {
					t.Fatalf("after request %d: %v %q, want %v %q", i, h.State, h.Reason, s.state, s.reason)
				}
				if h.SinceRequest != int64(s.sinceAt) || !h.Since.Equal(at(s.sinceAt)) {
					t.Errorf("after request %d: since request %d at %v, want %d at %v",
						i, h.SinceRequest, h.Since, s.sinceAt, at(s.sinceAt))
				}
			}
			if changes != tt.changes {
				t.Errorf("Observe reported %d changes, want %d", changes, tt.changes)
			}
		})
	}
}

// TestLevels checks the baseline and current p50s: present once there is
// something to report, exact without noise.
func TestLevels(t *testing.T) {
	var d Detector
	if h := d.Health(); h.Baseline.RateOK || h.Current.RateOK || h.Baseline.TTFTOK || h.Current.TTFTOK {
		t.Fatalf("empty detector reports levels: %+v", h)
	}
	for i := range warm {
		d.Observe(Sample{At: at(i), Rate: 40, RateOK: true})
	}
	h := d.Health()
	want := Health{Baseline: Levels{Rate: 40, RateOK: true}, Current: Levels{Rate: 40, RateOK: true}}
	if !near(h.Baseline.Rate, 40) || !near(h.Current.Rate, 40) || h.Baseline.TTFTOK || h.Current.TTFTOK ||
		!h.Baseline.RateOK || !h.Current.RateOK {
		t.Errorf("levels %+v %+v, want %+v %+v", h.Baseline, h.Current, want.Baseline, want.Current)
	}
	// The current p50 is of the Current latest requests only.
	for i := range DefaultConfig.Current/2 + 1 {
		d.Observe(Sample{At: at(warm + i), Rate: 20, RateOK: true})
	}
	if h := d.Health(); !near(h.Current.Rate, 20) || !near(h.Baseline.Rate, 40) {
		t.Errorf("after %d requests at 20: current %v baseline %v, want 20 and 40",
			DefaultConfig.Current/2+1, h.Current.Rate, h.Baseline.Rate)
	}
}

// near: equal within float32 rounding of the stored ln values.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-5*math.Abs(b) }

func TestNumber(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{1234.6, "1235"},
		{100, "100"},
		{62.54, "62.5"},
		{10, "10.0"},
		{9.876, "9.88"},
		{1, "1.00"},
		{0.75, "0.750"},
		{0.0156, "0.0156"},
		{0.001, "0.00100"},
		{1.5e-6, "1.5e-06"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := number(tt.v); got != tt.want {
				t.Errorf("number(%v) = %q, want %q", tt.v, got, tt.want)
			}
		})
	}
}
