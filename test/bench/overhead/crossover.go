package main

import (
	"math"

	"github.com/tokentap/tokentap/internal/loadgen"
)

// A series with --compare is a two-treatment, two-sequence crossover:
// every run measures both builds, one on the tokentap path and one on the
// fourth, and the builds swap paths each run. The paths themselves differ
// within a series (one build can read dearer on one path than on the
// other, in either direction), so a run's difference is the builds'
// difference plus or minus the paths'.
// The mean of the differences cancels the paths' share when the runs are
// balanced, but its spread counts it as noise. The crossover analysis of
// Hills and Armitage (1979) splits the runs by which path the first build
// took: half the sum of the two groups' mean differences is the builds'
// difference, half their difference is the paths', and both intervals
// come from the spread within the groups, with the paths' swing taken out.

// crossover is the estimate of the builds' difference and of the paths'
// difference from one series, for one figure.
type crossover struct {
	// Build is the first build less the second, the paths' share taken
	// out.
	Build estimate `json:"build"`
	// Paths is the tokentap path less the fourth, for the same build.
	Paths estimate `json:"paths"`
	// DF is the intervals' degrees of freedom: runs less two.
	DF int `json:"df"`
}

// estimate is a value with its 95 % interval.
type estimate struct {
	Value float64 `json:"value"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
}

// newCrossover estimates from the differences d (first build less second,
// run by run) and onTap (whether the first build was on the tokentap path
// in that run). ok is false when either group is empty or there are fewer
// than three runs, which leave no spread to estimate.
func newCrossover(d []float64, onTap []bool) (c crossover, ok bool) {
	var sum [2]float64
	var n [2]int
	for i, v := range d {
		g := group(onTap[i])
		sum[g] += v
		n[g]++
	}
	if n[0] == 0 || n[1] == 0 || n[0]+n[1] < 3 {
		return c, false
	}
	mean := [2]float64{sum[0] / float64(n[0]), sum[1] / float64(n[1])}
	var ss float64
	for i, v := range d {
		dev := v - mean[group(onTap[i])]
		ss += dev * dev
	}
	c.DF = n[0] + n[1] - 2
	s := math.Sqrt(ss / float64(c.DF))
	se := s / 2 * math.Sqrt(1/float64(n[0])+1/float64(n[1]))
	t := loadgen.TCritical(c.DF)
	at := func(v float64) estimate { return estimate{Value: v, Low: v - t*se, High: v + t*se} }
	c.Build = at((mean[0] + mean[1]) / 2)
	c.Paths = at((mean[0] - mean[1]) / 2)
	return c, true
}

// group is 0 for the runs with the first build on the tokentap path, 1
// for the others.
func group(onTap bool) int {
	if onTap {
		return 0
	}
	return 1
}
