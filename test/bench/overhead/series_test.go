package main

import (
	"math"
	"strings"
	"testing"
)

// fakeRun is a report with only what the summary reads: at concurrency 64,
// the tokentap path's and the fourth path's CPU vs Caddy and added p99.
func fakeRun(tokentap, fourth string, tapCPU, fourthCPU, tapP99, fourthP99 float64) seriesRun {
	paths := make([]pathRow, numPaths)
	paths[pathTokentap] = pathRow{CPUVsCaddy: ptr(tapCPU), AddedP99us: ptr(tapP99)}
	paths[pathControl] = pathRow{CPUVsCaddy: ptr(fourthCPU), AddedP99us: ptr(fourthP99)}
	return seriesRun{Tokentap: tokentap, Fourth: fourth, Report: &report{Levels: []levelReport{{level: level{Concurrency: 64}, Paths: paths}}}}
}

func TestSeriesSummary(t *testing.T) {
	// t(0.975, 3), for the intervals of four runs.
	const t3 = 3.182446
	levels := []level{{64, 100, 50}}
	for _, tc := range []struct {
		name     string
		o        options
		runs     []seriesRun
		wantA    []float64 // the first row's CPU vs Caddy, run by run
		wantB    []float64
		wantP99A []float64
		// wantDiff is the paired difference's mean, sd and interval; nil
		// without --compare.
		wantDiff *[3]float64
	}{
		{
			name: "compare: the builds swap paths every run",
			o:    options{levels: levels, binary: "/a", compare: "/b"},
			runs: []seriesRun{
				fakeRun("/a", "/b", 1.12, 1.11, 100, 200),
				fakeRun("/b", "/a", 1.10, 1.10, 300, 50),
				fakeRun("/a", "/b", 1.06, 1.07, 150, 250),
				fakeRun("/b", "/a", 1.09, 1.12, 400, 100),
			},
			wantA:    []float64{1.12, 1.10, 1.06, 1.12},
			wantB:    []float64{1.11, 1.10, 1.07, 1.09},
			wantP99A: []float64{100, 50, 150, 100},
			// Differences 0.01, 0, -0.01, 0.03: mean 0.0075, sd
			// sqrt(8.75e-4 / 3).
			wantDiff: &[3]float64{0.0075, math.Sqrt(8.75e-4 / 3), t3 * math.Sqrt(8.75e-4/3) / 2},
		},
		{
			name: "A/A control: tokentap's path and the fourth",
			o:    options{levels: levels, binary: "/a"},
			runs: []seriesRun{
				fakeRun("/a", "", 1.10, 0.98, 900, -100),
				fakeRun("/a", "", 1.14, 1.01, 1100, 300),
			},
			wantA:    []float64{1.10, 1.14},
			wantB:    []float64{0.98, 1.01},
			wantP99A: []float64{900, 1100},
		},
		{
			name: "a run without CPU figures is left out",
			o:    options{levels: levels, binary: "/a", compare: "/b"},
			runs: []seriesRun{
				fakeRun("/a", "/b", 1.12, 1.11, 100, 200),
				{Tokentap: "/b", Fourth: "/a", Report: &report{Levels: []levelReport{{level: level{Concurrency: 64}, Paths: make([]pathRow, numPaths)}}}},
			},
			wantA:    []float64{1.12},
			wantB:    []float64{1.11},
			wantP99A: []float64{100},
			wantDiff: &[3]float64{0.01, math.NaN(), math.NaN()},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &series{Runs: tc.runs}
			s.summarise(tc.o)
			if len(s.Summary) != 1 || len(s.Summary[0].Rows) != 2 {
				t.Fatalf("summary %+v", s.Summary)
			}
			sl := s.Summary[0]
			near := func(what string, got, want []float64) {
				t.Helper()
				if len(got) != len(want) {
					t.Fatalf("%s: %v, want %v", what, got, want)
				}
				for i := range got {
					if math.Abs(got[i]-want[i]) > 1e-9 {
						t.Errorf("%s: %v, want %v", what, got, want)
						return
					}
				}
			}
			near("first row's CPU", sl.Rows[0].CPUVsCaddy, tc.wantA)
			near("second row's CPU", sl.Rows[1].CPUVsCaddy, tc.wantB)
			near("first row's added p99", sl.Rows[0].AddedP99us, tc.wantP99A)
			var sum float64
			for _, v := range tc.wantA {
				sum += v
			}
			if m := sl.Rows[0].CPUVsCaddyMean.Mean; math.Abs(m-sum/float64(len(tc.wantA))) > 1e-9 {
				t.Errorf("first row's mean %v, want %v", m, sum/float64(len(tc.wantA)))
			}
			if tc.wantDiff == nil {
				if sl.Difference != nil {
					t.Errorf("a difference without --compare: %+v", sl.Difference)
				}
				return
			}
			d := sl.Difference.CPUVsCaddyMean
			if math.Abs(d.Mean-tc.wantDiff[0]) > 1e-9 {
				t.Errorf("difference mean %v, want %v", d.Mean, tc.wantDiff[0])
			}
			if math.IsNaN(tc.wantDiff[1]) {
				if d.Stdev != nil {
					t.Errorf("an interval from one run: %+v", d)
				}
				return
			}
			if d.Stdev == nil || math.Abs(*d.Stdev-tc.wantDiff[1]) > 1e-9 ||
				math.Abs(*d.CILow-(tc.wantDiff[0]-tc.wantDiff[2])) > 1e-5 || math.Abs(*d.CIHigh-(tc.wantDiff[0]+tc.wantDiff[2])) > 1e-5 {
				t.Errorf("difference %+v, want sd %v, interval ±%v", d, tc.wantDiff[1], tc.wantDiff[2])
			}
		})
	}
}

func TestSeriesMarkdown(t *testing.T) {
	o := options{levels: []level{{64, 100, 50}}, binary: "/a", compare: "/b"}
	s := &series{Runs: []seriesRun{
		fakeRun("/a", "/b", 1.12, 1.11, 100, 200),
		fakeRun("/b", "/a", 1.10, 1.10, 300, 50),
	}}
	s.summarise(o)
	var b strings.Builder
	s.writeMarkdown(&b)
	for _, want := range []string{
		"# Summary of 2 runs",
		"## Concurrency 64",
		"| --binary /a | 1.120, 1.100 | 1.110 (",
		"| --compare /b | 1.110, 1.100 | 1.105 (",
		"| difference, first less second | +0.010, +0.000 | +0.005 (",
		"| 100, 50 | 75 (",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
}
