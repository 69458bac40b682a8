package main

import (
	"math"
	"strings"
	"testing"
)

// TestCrossover checks the crossover estimates against values worked by
// hand, among them the series of record of 2026-12-07 05:05 UTC.
func TestCrossover(t *testing.T) {
	// t(0.975, 6) and t(0.975, 1).
	const t6, t1 = 2.446912, 12.706205
	for _, tc := range []struct {
		name  string
		d     []float64
		onTap []bool
		ok    bool
		// build and paths are the estimates; half their intervals'
		// half-width.
		build, paths, half float64
	}{
		{
			name:  "eight runs, swapped each run (2026-12-07 05:05 UTC)",
			d:     []float64{0.094, -0.056, 0.004, -0.081, -0.019, -0.054, -0.002, -0.078},
			onTap: []bool{true, false, true, false, true, false, true, false},
			ok:    true,
			// Group means 0.01925 and -0.06725; the squares about them sum
			// to 0.0083415 over 6 degrees of freedom; the standard error
			// is s/2 * sqrt(1/4 + 1/4).
			build: -0.024, paths: 0.04325, half: t6 * math.Sqrt(0.0083415/6) / 2 * math.Sqrt(0.5),
		},
		{
			name:  "no paths' share: the same as the mean difference",
			d:     []float64{0.02, 0.02, 0.02},
			onTap: []bool{true, false, true},
			ok:    true, build: 0.02, paths: 0, half: 0,
		},
		{
			name:  "the paths' share alone",
			d:     []float64{0.05, -0.05, 0.05, -0.05},
			onTap: []bool{true, false, true, false},
			ok:    true, build: 0, paths: 0.05, half: 0,
		},
		{
			name:  "unbalanced groups",
			d:     []float64{0.1, 0.3, -0.2},
			onTap: []bool{true, true, false},
			// Means 0.2 and -0.2; squares 0.02 over 1 degree of freedom;
			// standard error sqrt(0.02)/2 * sqrt(1/2 + 1).
			ok: true, build: 0, paths: 0.2, half: t1 * math.Sqrt(0.02) / 2 * math.Sqrt(1.5),
		},
		{name: "every run on one path", d: []float64{0.1, 0.2, 0.3}, onTap: []bool{true, true, true}},
		{name: "two runs leave no spread", d: []float64{0.1, 0.2}, onTap: []bool{true, false}},
		{name: "no runs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := newCrossover(tc.d, tc.onTap)
			if ok != tc.ok {
				t.Fatalf("ok %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			near := func(what string, got, want float64) {
				t.Helper()
				if math.Abs(got-want) > 1e-5 {
					t.Errorf("%s %.6f, want %.6f", what, got, want)
				}
			}
			near("build", c.Build.Value, tc.build)
			near("build low", c.Build.Low, tc.build-tc.half)
			near("build high", c.Build.High, tc.build+tc.half)
			near("paths", c.Paths.Value, tc.paths)
			near("paths low", c.Paths.Low, tc.paths-tc.half)
			near("paths high", c.Paths.High, tc.paths+tc.half)
			if c.DF != len(tc.d)-2 {
				t.Errorf("df %d, want %d", c.DF, len(tc.d)-2)
			}
		})
	}
}

// TestSeriesCrossoverMarkdown checks that a compared series' summary
// gives the crossover line, with the builds' and the paths' estimates.
func TestSeriesCrossoverMarkdown(t *testing.T) {
	o := options{levels: []level{{64, 100, 50}}, binary: "/a", compare: "/b"}
	s := &series{Runs: []seriesRun{
		fakeRun("/a", "/b", 1.15, 1.10, 100, 200),
		fakeRun("/b", "/a", 1.14, 1.11, 300, 50),
		fakeRun("/a", "/b", 1.13, 1.08, 150, 250),
		fakeRun("/b", "/a", 1.16, 1.12, 400, 100),
	}}
	s.summarise(o)
	c := s.Summary[0].CPUCrossover
	if c == nil || s.Summary[0].P99Crossover == nil {
		t.Fatalf("no crossover in %+v", s.Summary[0])
	}
	// Differences, first less second: 0.05 and 0.05 in runs 1 and 3
	// (the first build on the tokentap path), 1.11-1.14 = -0.03 and
	// 1.12-1.16 = -0.04 in runs 2 and 4. Group means 0.05 and -0.035.
	if math.Abs(c.Build.Value-0.0075) > 1e-9 || math.Abs(c.Paths.Value-0.0425) > 1e-9 {
		t.Errorf("build %v, paths %v; want 0.0075 and 0.0425", c.Build.Value, c.Paths.Value)
	}
	var b strings.Builder
	s.writeMarkdown(&b)
	for _, want := range []string{"crossover, 2 degrees of freedom", "the builds differ by +0.008 (-0.003 to +0.018)", "the tokentap path less the fourth, for the same build, +0.042"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}
