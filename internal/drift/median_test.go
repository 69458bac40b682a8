package drift

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		name string
		in   []float32
		want float64
	}{
		{"one value", []float32{3}, 3},
		{"two values average", []float32{1, 2}, 1.5},
		{"odd unsorted", []float32{5, 1, 4, 2, 3}, 3},
		{"even unsorted", []float32{4, 1, 3, 2}, 2.5},
		{"ascending", []float32{1, 2, 3, 4, 5, 6, 7}, 4},
		{"descending", []float32{7, 6, 5, 4, 3, 2, 1}, 4},
		{"all equal", []float32{2, 2, 2, 2, 2, 2}, 2},
		{"many duplicates of the middle", []float32{1, 5, 5, 5, 5, 9, 0, 5}, 5},
		{"negatives (ln of values below 1)", []float32{-3, -1, -2}, -2},
		{"outlier does not move it", []float32{1, 2, 3, 1e30}, 2.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			if got := median(in); got != tt.want {
				t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

// TestMedianMatchesSort checks selection against sorting on seeded random
// arrays of every length up to MaxBaseline, with ties (few distinct
// values) and without.
func TestMedianMatchesSort(t *testing.T) {
	tests := []struct {
		name     string
		distinct int // 0: continuous values
	}{
		{"continuous", 0},
		{"three distinct values", 3},
		{"two distinct values", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(tt.distinct)))
			for n := 1; n <= MaxBaseline; n++ {
				a := make([]float32, n)
				for i := range a {
					if tt.distinct > 0 {
						a[i] = float32(r.IntN(tt.distinct))
					} else {
						a[i] = float32(r.NormFloat64())
					}
				}
				s := slices.Clone(a)
				slices.Sort(s)
				want := float64(s[n/2])
				if n%2 == 0 {
					want = (float64(s[n/2-1]) + float64(s[n/2])) / 2
				}
				if got := median(slices.Clone(a)); got != want {
					t.Fatalf("n=%d: median = %v, want %v (input %v)", n, got, want, a)
				}
				for k := range n {
					b := slices.Clone(a)
					if got := selectKth(b, k); got != s[k] {
						t.Fatalf("n=%d: selectKth(%d) = %v, want %v", n, k, got, s[k])
					}
				}
			}
		})
	}
}
