package drift

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestMissingSignals: a request may carry one signal, the other, or
// neither; each signal is judged on the requests that carry it, and a
// gap in one leaves the other alone.
func TestMissingSignals(t *testing.T) {
	every := func(int) bool { return true }
	never := func(int) bool { return false }
	even := func(i int) bool { return i%2 == 0 }
	odd := func(i int) bool { return i%2 == 1 }
	thirds := func(i int) bool { return i%3 != 0 }
	tests := []struct {
		name             string
		hasRate, hasTTFT func(int) bool
		// slowRate or slowTTFT: which signal slows (rate to 70 %, time
		// to first token to 150 %).
		slowRate, slowTTFT bool
		// wantReason is the start of the reason once slow.
		wantReason string
	}{
		{"no time to first token, rate slows", every, never, true, false, "p50 output tokens/s"},
		{"no rate (errored requests), ttft slows", never, every, false, true, "p50 time to first token"},
		{"rate on alternate requests slows, ttft steady", even, every, true, false, "p50 output tokens/s"},
		{"ttft on alternate requests slows, rate steady", every, odd, false, true, "p50 time to first token"},
		{"signals on disjoint requests, rate slows", even, odd, true, false, "p50 output tokens/s"},
		{"rate on two thirds, ttft slows", thirds, every, false, true, "p50 time to first token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Detector
			i := 0
			// carrying counts the requests of the slowdown that carry
			// the slowed signal.
			obs := func(slow bool) {
				i++
				rf, tf := 1.0, 1.0
				if slow && tt.slowRate {
					rf = 0.7
				}
				if slow && tt.slowTTFT {
					tf = 1.5
				}
				d.Observe(Sample{At: at(i), Rate: 50 * rf, RateOK: tt.hasRate(i), TTFT: 0.5 * tf, TTFTOK: tt.hasTTFT(i)})
			}
			for range 4 * warm {
				obs(false)
			}
			if h := d.Health(); h.State != OK {
				t.Fatalf("after %d steady requests: %v (%s), want ok", i, h.State, h.Reason)
			}
			carries := tt.hasRate
			if tt.slowTTFT {
				carries = tt.hasTTFT
			}
			carrying := 0
			for d.Health().State != Slow && carrying < 100 {
				obs(true)
				if carries(i) {
					carrying++
				}
			}
			h := d.Health()
			if h.State != Slow || carrying != DefaultConfig.MinRun {
				t.Fatalf("state %v after %d requests carrying the slowed signal, want slow after %d",
					h.State, carrying, DefaultConfig.MinRun)
			}
			if !strings.HasPrefix(h.Reason, tt.wantReason) || strings.Contains(h.Reason, ";") {
				t.Errorf("reason %q, want only %q", h.Reason, tt.wantReason)
			}
			// The other signal, where present, still has its baseline.
			if tt.slowRate && h.Baseline.TTFTOK && !near(h.Baseline.TTFT, 0.5) {
				t.Errorf("ttft baseline %v, want 0.5", h.Baseline.TTFT)
			}
			if tt.slowTTFT && h.Baseline.RateOK && !near(h.Baseline.Rate, 50) {
				t.Errorf("rate baseline %v, want 50", h.Baseline.Rate)
			}
		})
	}
}

// TestFaultsIgnored: values that are not a possible rate or time are
// counted and otherwise have no effect: a detector fed them gives, after
// every request, the same health as one whose requests lacked them.
func TestFaultsIgnored(t *testing.T) {
	faults := []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, 0, -0.0, 1e-10, 2e12, math.MaxFloat64, -math.SmallestNonzeroFloat64}
	tests := []struct {
		name string
		// share of requests whose value is replaced by a fault, per signal.
		rateShare, ttftShare float64
	}{
		{"rate faults", 0.2, 0},
		{"ttft faults", 0, 0.2},
		{"both, often", 0.5, 0.5},
		{"nearly all rate values", 0.95, 0.1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			var got, want Detector
			var faulted int64
			for i := range 3000 {
				// A slowdown in the middle exercises every state.
				f := 1.0
				if i >= 1500 && i < 1800 {
					f = 0.6
				}
				s := Sample{At: at(i), Rate: 50 * f * lognormal(r, 0.2), RateOK: true, TTFT: 0.5 / f * lognormal(r, 0.2), TTFTOK: true}
				clean := s
				if r.Float64() < tt.rateShare {
					s.Rate, clean.RateOK = faults[r.IntN(len(faults))], false
					faulted++
				}
				if r.Float64() < tt.ttftShare {
					s.TTFT, clean.TTFTOK = faults[r.IntN(len(faults))], false
					faulted++
				}
				gc, wc := got.Observe(s), want.Observe(clean)
				gh, wh := got.Health(), want.Health()
				if gc != wc || !reflect.DeepEqual(gh, wh) {
					t.Fatalf("request %d: with faults %v %+v, without %v %+v", i, gc, gh, wc, wh)
				}
				for _, v := range []float64{gh.Baseline.Rate, gh.Baseline.TTFT, gh.Current.Rate, gh.Current.TTFT} {
					if math.IsNaN(v) || math.IsInf(v, 0) {
						t.Fatalf("request %d: a level is %v", i, v)
					}
				}
			}
			if got.Ignored() != faulted || want.Ignored() != 0 {
				t.Errorf("Ignored() = %d and %d, want %d and 0", got.Ignored(), want.Ignored(), faulted)
			}
			if got.Requests() != 3000 {
				t.Errorf("Requests() = %d, want 3000", got.Requests())
			}
		})
	}
}

// TestExtremesAccepted: the ends of the accepted range are values, not
// faults, and a detector fed only them stays finite.
func TestExtremesAccepted(t *testing.T) {
	tests := []struct {
		name string
		v    float64
	}{
		{"smallest", minValue},
		{"largest", maxValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Detector
			for i := range 2 * warm {
				d.Observe(both(i, tt.v, tt.v))
			}
			h := d.Health()
			if d.Ignored() != 0 || h.State != OK || !near(h.Baseline.Rate, tt.v) || !near(h.Current.TTFT, tt.v) {
				t.Errorf("ignored %d, health %+v, want 0 ignored, ok at %v", d.Ignored(), h, tt.v)
			}
		})
	}
}
