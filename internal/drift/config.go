package drift

import (
	"fmt"
	"math"
)

// Capacities of a Detector's fixed arrays. A Config may use less of them,
// never more: they are what make a Detector's size a constant (StateBytes).
const (
	// MaxBaseline is the most requests a signal's baseline can hold.
	MaxBaseline = 128
	// MaxLag is the most recent requests a signal can hold back from its
	// baseline.
	MaxLag = 32
)

// Config holds a Detector's thresholds and window sizes. The zero value of
// a field means its default (DefaultConfig), so Config{} is the defaults
// and Config{RateDrop: 0.2} changes only that.
type Config struct {
	// RateDrop is the relative fall in output tokens/s that must be
	// flagged: 0.30 means a row whose rate falls to 70 % of its baseline
	// is flagged within a few dozen requests. Default 0.30; must be in
	// (0, 1).
	//
	// It is the size of change the test is built to find quickly, not a
	// cut-off: the test's line sits a little over halfway to it in log
	// space (a fall of about 18 % for 0.30), so a sustained fall between
	// the line and the threshold is flagged too, less surely and later,
	// and a fall well inside it (10 %) rarely is. See the package
	// documentation; docs/drift.md measures how often each size is
	// flagged.
	RateDrop float64

	// TTFTRise is the relative rise in time to first token that must be
	// flagged: 0.50 means a row whose time to first token grows to 150 %
	// of its baseline. Default 0.50; must be in (0, 100]. Its line is at
	// about +25 %.
	TTFTRise float64

	// Evidence is how much evidence, in nats (natural-log likelihood
	// ratio), a signal must gather that it sits at its threshold rather
	// than near its baseline before it is flagged, and that it is back
	// near its baseline before it is cleared. Higher means fewer false
	// alarms and later detection; docs/drift.md measures both at the
	// default. Default 12; must be in [2, 50].
	Evidence float64

	// MinRun is the fewest requests that can raise or clear a flag: one
	// request adds at most Evidence/MinRun, so a single wild request (a
	// retry storm, a cold cache) moves nothing on its own. Default 3; must
	// be in [1, 16].
	MinRun int

	// Baseline is how many requests the baseline's median and spread are
	// taken over: the requests before the Lag most recent ones. More is a
	// steadier baseline that follows a slow drift more slowly. Default and
	// maximum MaxBaseline (128); at least 16.
	Baseline int

	// MinBaseline is how many requests the baseline needs before the
	// signal is judged; until then it is insufficient_data. Default 64;
	// must be in [8, Baseline].
	MinBaseline int

	// Lag is how many of the most recent requests are held back from the
	// baseline, so that the start of a slowdown is judged against the
	// requests before it instead of leaking into its own reference. It
	// should exceed the detection delay (docs/drift.md measures it).
	// Default and maximum MaxLag (32); at least MinRun and Current.
	Lag int

	// Current is how many of the most recent requests the reported
	// current p50 is the median of. It is for display only: the decision
	// uses every request. Default 8; must be in [1, Lag].
	Current int
}

// DefaultConfig is the configuration a zero Config stands for.
var DefaultConfig = Config{
	RateDrop:    0.30,
	TTFTRise:    0.50,
	Evidence:    12,
	MinRun:      3,
	Baseline:    MaxBaseline,
	MinBaseline: 64,
	Lag:         MaxLag,
	Current:     8,
}

// withDefaults returns c with each zero field set to its default.
func (c Config) withDefaults() Config {
	d := DefaultConfig
	if c.RateDrop == 0 {
		c.RateDrop = d.RateDrop
	}
	if c.TTFTRise == 0 {
		c.TTFTRise = d.TTFTRise
	}
	if c.Evidence == 0 {
		c.Evidence = d.Evidence
	}
	if c.MinRun == 0 {
		c.MinRun = d.MinRun
	}
	if c.Baseline == 0 {
		c.Baseline = d.Baseline
	}
	if c.MinBaseline == 0 {
		c.MinBaseline = min(d.MinBaseline, c.Baseline)
	}
	if c.Lag == 0 {
		c.Lag = d.Lag
	}
	if c.Current == 0 {
		c.Current = min(d.Current, c.Lag)
	}
	return c
}

// Validate reports the first field of c, after defaults, that a Detector
// cannot work with. A threshold outside its range would make the test
// meaningless (a drop of 100 % has no log distance); a size outside the
// arrays' capacity would not fit.
func (c Config) Validate() error {
	c = c.withDefaults()
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case !finite(c.RateDrop) || c.RateDrop <= 0 || c.RateDrop >= 1:
		return fmt.Errorf("drift: rate_drop %v: want a fraction in (0, 1)", c.RateDrop)
	case !finite(c.TTFTRise) || c.TTFTRise <= 0 || c.TTFTRise > 100:
		return fmt.Errorf("drift: ttft_rise %v: want a fraction in (0, 100]", c.TTFTRise)
	case !finite(c.Evidence) || c.Evidence < 2 || c.Evidence > 50:
		return fmt.Errorf("drift: evidence %v: want nats in [2, 50]", c.Evidence)
	case c.MinRun < 1 || c.MinRun > 16:
		return fmt.Errorf("drift: min_run %d: want 1 to 16 requests", c.MinRun)
	case c.Baseline < 16 || c.Baseline > MaxBaseline:
		return fmt.Errorf("drift: baseline %d: want 16 to %d requests", c.Baseline, MaxBaseline)
	case c.MinBaseline < 8 || c.MinBaseline > c.Baseline:
		return fmt.Errorf("drift: min_baseline %d: want 8 to baseline (%d) requests", c.MinBaseline, c.Baseline)
	case c.Lag < 1 || c.Lag > MaxLag:
		return fmt.Errorf("drift: lag %d: want 1 to %d requests", c.Lag, MaxLag)
	case c.Lag < c.MinRun:
		return fmt.Errorf("drift: lag %d: want at least min_run (%d) requests", c.Lag, c.MinRun)
	case c.Current < 1 || c.Current > c.Lag:
		return fmt.Errorf("drift: current %d: want 1 to lag (%d) requests", c.Current, c.Lag)
	}
	return nil
}
