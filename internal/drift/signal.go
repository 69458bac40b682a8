package drift

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// signalKind names the two per-request measures a Detector watches.
type signalKind uint8

const (
	rate signalKind = iota // output tokens/s: lower is slower
	ttft                   // time to first token: higher is slower
	numSignals
)

// The hypotheses of the two tests, as shares of a signal's threshold
// distance delta (package documentation, "Method").
const (
	// toleranceShare is the least tolerance: the flagging test weighs
	// "tolerance off the baseline" against "delta off", not "exactly on
	// it", so that a baseline a little off the row's true level, or a
	// small step, is still normal. Its line is the midpoint,
	// (delta+tolerance)/2: 0.55·delta at this least tolerance.
	toleranceShare = 0.10
	// baselineErrorZ widens the tolerance to this many standard errors of
	// the baseline's median (1.2533·σ/sqrt(n) for n values of spread σ)
	// when that is more: a jittery row's baseline is less sure, and
	// judging against its error as if it were a change is what raises a
	// jittery row's false alarms. For the 30 % threshold and a full
	// baseline it widens past a tenth from a spread σ of 0.16.
	baselineErrorZ = 2
	// maxToleranceShare caps the tolerance, below clearShare so that both
	// tests keep their direction; a row that reaches it varies too much
	// for its threshold to be judged quickly.
	maxToleranceShare = 0.5
	// clearShare is where the clearing test puts "still slow": it weighs
	// "tolerance off" (recovered) against "clearShare·delta off", whose
	// midpoint is below the flagging line. A signal that settles between
	// the two lines keeps the state it had: the hysteresis that keeps a
	// slowdown of about half the threshold from flapping. Nearer 1
	// clears faster and flaps more.
	clearShare = 0.85
	// minScaleShare is the floor of the baseline's spread as a share of
	// delta, so that a row of identical values (a simulator, a cache)
	// does not give one request an unbounded weight.
	minScaleShare = 1.0 / 8
)

// sigParams are the constants of one signal's test, derived from a Config
// once so that Observe takes no logarithm of a threshold.
type sigParams struct {
	// sign turns ln(value) - ln(baseline) into a badness, positive when
	// slower: -1 for the rate, +1 for time to first token.
	sign float64
	// delta is the threshold as a distance in ln space, where a relative
	// change is the same distance whatever the row's speed.
	delta float64
	// floor is the least spread the baseline is taken to have;
	// minTolerance and maxTolerance bound the tolerance.
	floor, minTolerance, maxTolerance float64
}

func newSigParams(sign, delta float64) sigParams {
	return sigParams{
		sign:         sign,
		delta:        delta,
		floor:        minScaleShare * delta,
		minTolerance: toleranceShare * delta,
		maxTolerance: maxToleranceShare * delta,
	}
}

// signal is one signal's state: the baseline and recent ln values and the
// running evidence. Values are float32: the noise of a request is
// percents, the rounding of a float32 ten millionths.
type signal struct {
	// base holds the baseline's baseN values in ascending order, so that
	// its median is read, not computed; baseSeq[i] is the admission
	// number (mod 256) of base[i], which finds the oldest value to evict
	// without a second copy of the values in arrival order.
	base    [MaxBaseline]float32
	baseSeq [MaxBaseline]uint8
	nextSeq uint8
	baseN   int32
	// recent holds the Lag latest values, oldest at recentHead once
	// full. Each leaves it for the baseline, unless the signal is slow
	// (the baseline is frozen) or it is one of the drop values that were
	// recent when a slowdown cleared (the tail of the incident).
	recent              [MaxLag]float32
	recentHead, recentN int32
	drop                int32
	slow                bool
	// evidence is the running log-likelihood ratio (a CUSUM) of the test
	// in force: flagging while not slow, clearing while slow. It never
	// goes below zero, so evidence against a change is not banked
	// against the next one.
	evidence float64
	// med is the baseline's median and invVar 1/σ², σ its spread;
	// tolerance is the flagging test's "normal" (at least minTolerance).
	med, invVar, tolerance float64
}

// ready reports whether the baseline is large enough to judge against.
func (g *signal) ready(p *params) bool { return g.baseN >= p.minBaseline }

// observe judges the ln value x against the baseline, then moves it
// through the recent ring towards the baseline.
func (g *signal) observe(x float64, sp *sigParams, p *params) {
	if g.ready(p) {
		// The log-likelihood ratio of "at b" against "at a", for a
		// badness d of normal spread σ, is (b-a)/σ² · (d - (a+b)/2).
		d, a := sp.sign*(x-g.med), g.tolerance
		var e float64
		if !g.slow {
			b := sp.delta
			e = g.invVar * (b - a) * (d - (a+b)/2)
		} else {
			b := clearShare * sp.delta
			e = g.invVar * (b - a) * ((a+b)/2 - d)
		}
		g.evidence = max(0, g.evidence+max(-p.cap, min(p.cap, e)))
		if g.evidence >= p.evidence {
			g.slow, g.evidence = !g.slow, 0
			if !g.slow {
				// The recent values are still the end of the slowdown:
				// none of them may enter the baseline.
				g.drop = g.recentN
			}
		}
	}
	old, full := g.recent[g.recentHead], g.recentN == p.lag
	g.recent[g.recentHead] = float32(x)
	g.recentHead = (g.recentHead + 1) % p.lag
	switch {
	case !full:
		g.recentN++
	case g.drop > 0:
		g.drop--
	case !g.slow:
		g.admit(old, sp, p)
	}
}

// admit adds x to the baseline, in place of its oldest value once full,
// and recomputes the median and spread. Kept sorted, the baseline's median
// is read rather than selected, and an update is one insertion-sort step.
func (g *signal) admit(x float32, sp *sigParams, p *params) {
	n := g.baseN
	i := n
	if n == p.baseline {
		i = g.oldest()
	} else {
		n++
		g.baseN = n
	}
	a, seq := g.base[:n], g.baseSeq[:n]
	// Move x from slot i to its place, shifting the values it passes.
	for i > 0 && a[i-1] > x {
		a[i], seq[i] = a[i-1], seq[i-1]
		i--
	}
	for i < n-1 && a[i+1] < x {
		a[i], seq[i] = a[i+1], seq[i+1]
		i++
	}
	a[i], seq[i] = x, g.nextSeq
	g.nextSeq++

	m := int(n)
	half := m / 2
	if m%2 == 1 {
		g.med = float64(a[half])
	} else {
		g.med = (float64(a[half-1]) + float64(a[half])) / 2
	}
	// The spread is the mean absolute deviation from the median, scaled
	// to a normal σ (by sqrt(π/2)); not the median absolute deviation,
	// which is 0 for a row whose values mostly repeat (a quantized timer,
	// a cache) and would then give every small departure a huge weight.
	// Outliers widen it, which slows the test rather than making it jump.
	// Sorted, the deviations sum to the upper half's values less the
	// lower half's: the median cancels out.
	var s0, s1 float64
	j := 0
	for ; j+1 < half; j += 2 {
		s0 += float64(a[m-1-j]) - float64(a[j])
		s1 += float64(a[m-2-j]) - float64(a[j+1])
	}
	if j < half {
		s0 += float64(a[m-1-j]) - float64(a[j])
	}
	s := max((s0+s1)/float64(m)*math.Sqrt(math.Pi/2), sp.floor)
	g.invVar = 1 / (s * s)
	se := math.Sqrt(math.Pi/2) * s / math.Sqrt(float64(m))
	g.tolerance = min(sp.maxTolerance, max(sp.minTolerance, baselineErrorZ*se))
}

// oldest returns the slot of the baseline's oldest value. At most
// MaxBaseline < 256 values are live, so their admission numbers mod 256
// are distinct and the oldest is nextSeq-baseN. The slots are searched
// eight at a time: a slot holding the number is a zero byte of the word
// XOR the number repeated, and the lowest zero byte's flag in
// (w-0x01..01) &^ w & 0x80..80 is exact.
func (g *signal) oldest() int32 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	want := uint64(g.nextSeq-uint8(g.baseN)) * ones
	for j := 0; j < MaxBaseline; j += 8 {
		w := binary.LittleEndian.Uint64(g.baseSeq[j:j+8]) ^ want
		if z := (w - ones) &^ w & highs; z != 0 {
			return int32(j + bits.TrailingZeros64(z)/8)
		}
	}
	panic("drift: the baseline lost its oldest value")
}

// current returns the median of the n latest values (fewer if there are
// fewer), and false if there are none.
func (g *signal) current(n int32, p *params) (float64, bool) {
	n = min(n, g.recentN)
	if n == 0 {
		return 0, false
	}
	var scratch [MaxLag]float32
	for i := range n {
		// The newest value is just before recentHead.
		scratch[i] = g.recent[(g.recentHead-1-i+p.lag)%p.lag]
	}
	return median(scratch[:n]), true
}
