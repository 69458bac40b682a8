package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestQuantilesApartReadInOrder: docs/live-stats.md says two rows whose p95
// differ by more than 2.03 % always read in the right order. That follows
// from the 1 % accuracy (1.01/0.99 < 1.0203); this checks it where it is
// tightest. Each trial records one row's values and another's, the same
// values times 1.0203, so that the second's value at every rank is exactly
// 2.03 % above the first's, at a random scale (so the values fall anywhere
// in their bins), spread up to 100x within one slice; both the metric whose
// high tail the sketch keeps and the one whose slow tail it keeps.
func TestQuantilesApartReadInOrder(t *testing.T) {
	const apart = 1.0203
	rnd := rand.New(rand.NewPCG(7, 11))
	for _, m := range []Metric{TimeToFirstToken, OutputTokensPerSecond} {
		for trial := range 500 {
			s := newTestStore(0)
			base := math.Exp(rnd.Float64()*math.Log(100)) * 0.01
			spread := 1 + rnd.Float64()*99
			n := 20 + rnd.IntN(400)
			for range n {
				v := base * math.Pow(spread, rnd.Float64())
				record(s, key("p", "slower"), only(m, v), time.Minute)
				record(s, key("p", "faster"), only(m, v*apart), time.Minute)
			}
			a := s.Aggregate(Window5m, at(4*time.Minute))
			lo, hi := mustRow(t, a, "p", "slower"), mustRow(t, a, "p", "faster")
			for _, q := range []float64{0.5, 0.95} {
				x, okx := lo.Quantile(m, q)
				y, oky := hi.Quantile(m, q)
				if !okx || !oky || !(y > x) {
					t.Fatalf("%s trial %d (n %d, %s): p%g reads %v and %v for values %.2f %% apart",
						metrics[m].name, trial, n, fmt.Sprintf("%.4g to %.4g", base, base*spread), 100*q, x, y, 100*(apart-1))
				}
			}
		}
	}
}
