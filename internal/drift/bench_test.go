package drift

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkObserve measures one request in each state, with both signals
// present (the most work: two judgements, two baseline updates).
func BenchmarkObserve(b *testing.B) {
	tests := []struct {
		name string
		// rate is the factor of the measured requests' rate.
		rate float64
	}{
		{"ok", 1},
		{"slow", 0.5},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(13, 14))
			// A pool of noisy requests, drawn before the timer starts.
			var pool [1024]Sample
			for i := range pool {
				pool[i] = both(i, 50*tt.rate*lognormal(r, 0.2), 0.5*lognormal(r, 0.2))
			}
			var d Detector
			for i := range 1000 {
				d.Observe(both(i, 50*lognormal(r, 0.2), 0.5*lognormal(r, 0.2)))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				d.Observe(pool[i%len(pool)])
			}
		})
	}
}

// BenchmarkHealth measures reading a row's verdict, which builds its
// reason's text.
func BenchmarkHealth(b *testing.B) {
	r := rand.New(rand.NewPCG(15, 16))
	var d Detector
	for i := range 1000 {
		d.Observe(both(i, 50*lognormal(r, 0.2), 0.5*lognormal(r, 0.2)))
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = d.Health()
	}
}
