package drift

import (
	"math"
	"math/rand/v2"
	"testing"
)

// windowRule is the alternative the package documentation weighs the
// CUSUM against: the median of the last k requests against the same
// baseline (the median of the 128 before the 32 latest, frozen while
// slow), flagged after confirm consecutive requests beyond the CUSUM's
// flagging line and cleared after confirm within its clearing line. It
// keeps its baseline in a signal.
type windowRule struct {
	k, confirm int
	g          signal
	values     []float64 // every ln value (test code may allocate)
	slow       bool
	streak     int
}

func (w *windowRule) observe(v float64) bool {
	p, sp := &defaultParams, &defaultParams.sig[rate]
	w.values = append(w.values, math.Log(v))
	n := len(w.values)
	if n > int(p.lag) && !w.slow {
		w.g.admit(float32(w.values[n-1-int(p.lag)]), sp, p)
	}
	if !w.g.ready(p) || n < w.k {
		return w.slow
	}
	var scratch [MaxLag]float32
	for i, x := range w.values[n-w.k:] {
		scratch[i] = float32(x)
	}
	d, a := sp.sign*(median(scratch[:w.k])-w.g.med), w.g.tolerance
	beyond := d > (sp.delta+a)/2
	if w.slow {
		beyond = d < (clearShare*sp.delta+a)/2
	}
	if beyond {
		w.streak++
	} else {
		w.streak = 0
	}
	if w.streak >= w.confirm {
		w.slow, w.streak = !w.slow, 0
	}
	return w.slow
}

// TestCompareWindowMedian measures the window-median rule beside the
// CUSUM on the same seeded rows (output tokens/s only, log-normal noise
// σ 0.2): the share of steady 2,000-request runs with a false alarm, and
// the p99 delay of flagging a 30 % fall. The CUSUM must do at least as
// well as every variant on one measure and better on the other: no
// window is both quicker and quieter.
func TestCompareWindowMedian(t *testing.T) {
	const requests, start, fall = 2000, 300, 0.7
	n := runs(t, 400, 400)
	measure := func(newRule func() func(float64) bool) (falseAlarms float64, p99 int) {
		alarms := 0
		var detect []int
		for run := range n {
			r := rand.New(rand.NewPCG(uint64(run), 4))
			obs := newRule()
			for range requests {
				if obs(50 * lognormal(r, 0.2)) {
					alarms++
					break
				}
			}
			obs = newRule()
			det := never
			for i := range start + 200 {
				f := 1.0
				if i >= start {
					f = fall
				}
				if obs(50*f*lognormal(r, 0.2)) && det == never {
					if det = i - start + 1; i < start {
						det = never // a false alarm is no detection
					}
					break
				}
			}
			detect = append(detect, det)
		}
		_, p99, _ = delays(detect)
		return float64(alarms) / float64(n), p99
	}
	cusum := func() func(float64) bool {
		d := new(Detector)
		return func(v float64) bool { d.Observe(Sample{Rate: v, RateOK: true}); return d.state == Slow }
	}
	cFA, cP99 := measure(cusum)
	t.Logf("CUSUM (Evidence %v, MinRun %d), %d runs: false alarms in %.2f %% of runs, p99 delay %s",
		DefaultConfig.Evidence, DefaultConfig.MinRun, n, 100*cFA, fmtDelay(cP99))
	tests := []struct{ k, confirm int }{
		{16, 3}, {16, 8}, {24, 3}, {32, 3}, {32, 8},
	}
	for _, tt := range tests {
		t.Run("median of "+itoa(tt.k)+", "+itoa(tt.confirm)+" confirmations", func(t *testing.T) {
			fa, p99 := measure(func() func(float64) bool {
				w := &windowRule{k: tt.k, confirm: tt.confirm}
				return w.observe
			})
			t.Logf("median of the last %d, %d confirmations: false alarms in %.2f %% of runs, p99 delay %s",
				tt.k, tt.confirm, 100*fa, fmtDelay(p99))
			if fa <= cFA && p99 <= cP99 && (fa < cFA || p99 < cP99) {
				t.Errorf("the window rule beats the CUSUM: false alarms %.2f %% and p99 %d against %.2f %% and %d",
					100*fa, p99, 100*cFA, cP99)
			}
		})
	}
}
