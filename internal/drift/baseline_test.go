package drift

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBaselineFrozen: a long incident does not become the new normal, and
// its last requests, still recent when it clears, never enter the
// baseline.
func TestBaselineFrozen(t *testing.T) {
	tests := []struct {
		name     string
		incident int // requests
		noise    float64
	}{
		{"short incident, no noise", 40, 0},
		{"long incident, no noise", 5000, 0},
		{"long incident, log-normal noise", 5000, 0.2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, 6))
			var d Detector
			i := 0
			// incident holds the ln values (as stored) of the incident.
			incident := map[float32]bool{}
			obs := func(rate float64) {
				i++
				v := rate * lognormal(r, tt.noise)
				if rate != 50 {
					incident[float32(math.Log(v))] = true
				}
				d.Observe(Sample{At: at(i), Rate: v, RateOK: true})
			}
			for range 500 {
				obs(50)
			}
			before := d.Health().Baseline.Rate
			for range tt.incident {
				obs(25)
				if h := d.Health(); h.State == Slow && h.Baseline.Rate != before {
					t.Fatalf("request %d, slow: baseline %v, want it frozen at %v", i, h.Baseline.Rate, before)
				}
			}
			if s := d.Health().State; s != Slow {
				t.Fatalf("after the incident: %v, want slow", s)
			}
			// None of the incident's values may be admitted, before or
			// after it clears.
			for range 500 {
				obs(50)
				g := &d.sig[rate]
				for _, v := range g.base[:g.baseN] {
					if incident[v] && tt.noise > 0 || tt.noise == 0 && float64(v) < math.Log(40) {
						t.Fatalf("request %d: the baseline holds an incident value, %v", i, math.Exp(float64(v)))
					}
				}
			}
			h := d.Health()
			if h.State != OK || math.Abs(h.Baseline.Rate/50-1) > 0.05 {
				t.Errorf("after recovery: %v, baseline %v, want ok and 50 within 5 %%", h.State, h.Baseline.Rate)
			}
		})
	}
}

// TestBaselineFollowsDrift: outside incidents the baseline follows the
// row, so a slow drift far beyond the threshold in total is absorbed, not
// flagged, when each stretch of a few hundred requests moves little.
func TestBaselineFollowsDrift(t *testing.T) {
	tests := []struct {
		name  string
		total float64 // the rate's final factor
		over  int     // requests
	}{
		{"halving over 20,000 requests", 0.5, 20000},
		{"doubling over 20,000 requests", 2, 20000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 8))
			var d Detector
			for i := range tt.over {
				f := math.Pow(tt.total, float64(i)/float64(tt.over))
				d.Observe(Sample{At: at(i), Rate: 50 * f * lognormal(r, 0.2), RateOK: true, TTFT: 0.5 / f * lognormal(r, 0.2), TTFTOK: true})
				if h := d.Health(); h.State == Slow {
					t.Fatalf("request %d (factor %.3f): flagged: %s", i, f, h.Reason)
				}
			}
			if b := d.Health().Baseline.Rate; math.Abs(b/(50*tt.total)-1) > 0.1 {
				t.Errorf("baseline %v, want %v within 10 %%", b, 50*tt.total)
			}
		})
	}
}

// TestBaselineMatchesBruteForce: the sorted baseline, updated in place,
// holds exactly the last Baseline admitted values, and its median and
// spread are those computed from scratch.
func TestBaselineMatchesBruteForce(t *testing.T) {
	tests := []struct {
		name     string
		baseline int
		distinct int // 0: continuous values; else that many distinct
	}{
		{"full size, continuous", MaxBaseline, 0},
		{"full size, many ties", MaxBaseline, 4},
		{"small odd size", 17, 0},
		{"small size, two values", 20, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(17, uint64(tt.baseline)))
			c := Config{Baseline: tt.baseline, MinBaseline: 8}
			d, err := New(c)
			if err != nil {
				t.Fatal(err)
			}
			g, sp := &d.sig[rate], &d.p.sig[rate]
			var admitted []float32
			for i := range 1000 {
				x := float32(r.NormFloat64())
				if tt.distinct > 0 {
					x = float32(r.IntN(tt.distinct))
				}
				g.admit(x, sp, &d.p)
				admitted = append(admitted, x)
				want := slices.Clone(admitted[max(0, len(admitted)-tt.baseline):])
				slices.Sort(want)
				if got := g.base[:g.baseN]; !slices.Equal(got, want) {
					t.Fatalf("admission %d: baseline %v, want %v", i, got, want)
				}
				med := median(slices.Clone(want))
				var sum float64
				for _, v := range want {
					sum += math.Abs(float64(v) - med)
				}
				s := max(sum/float64(len(want))*math.Sqrt(math.Pi/2), sp.floor)
				if g.med != med || math.Abs(g.invVar*s*s-1) > 1e-12 {
					t.Fatalf("admission %d: median %v and 1/σ² %v, want %v and %v", i, g.med, g.invVar, med, 1/(s*s))
				}
			}
		})
	}
}
