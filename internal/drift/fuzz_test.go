package drift

import (
	"encoding/binary"
	"math"
	"testing"
)

// fuzzConfigs are the configurations FuzzObserve picks from: the
// defaults, and windows small enough for short inputs to reach every
// state and turn the rings.
var fuzzConfigs = []Config{
	{},
	{Baseline: 16, MinBaseline: 8, Lag: 4, Current: 2, MinRun: 1, Evidence: 2},
	{Baseline: 17, MinBaseline: 9, Lag: 3, Current: 3, MinRun: 3, Evidence: 3, RateDrop: 0.05, TTFTRise: 0.05},
}

// fuzzValue decodes one value: most bytes are a geometric ladder from far
// below to far above the accepted range, a few are faults.
func fuzzValue(b byte) float64 {
	switch b {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1)
	case 2:
		return math.Inf(-1)
	case 3:
		return 0
	case 4:
		return -1
	}
	return math.Exp2((float64(b) - 128) / 3) // 2^-41 to 2^42
}

// FuzzObserve feeds arbitrary sequences and checks, after every request,
// that nothing panicked and the state is whole: a valid state that
// agrees with the signals, finite positive levels within the accepted
// range, sorted baselines within their sizes, finite evidence, counters
// that add up, and a changed that tells the truth.
func FuzzObserve(f *testing.F) {
	f.Add(uint8(0), []byte{3, 100, 140, 3, 100, 140, 3, 100, 140})
	f.Add(uint8(1), []byte{
		3, 150, 110, 3, 150, 110, 3, 151, 110, 3, 149, 111, 3, 150, 110, 3, 150, 110,
		3, 150, 110, 3, 150, 110, 3, 150, 110, 3, 150, 110, 3, 150, 110, 3, 150, 110,
		3, 120, 130, 3, 120, 130, 3, 120, 130, 3, 150, 110, 3, 150, 110, 3, 150, 110,
	})
	f.Add(uint8(2), []byte{1, 0, 7, 2, 1, 200, 3, 4, 3, 0x80, 0, 0, 0, 0, 0, 0, 0xf8, 0x7f, 9})
	f.Fuzz(func(t *testing.T, sel uint8, data []byte) {
		c := fuzzConfigs[int(sel)%len(fuzzConfigs)]
		d, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		c = c.withDefaults()
		prev, prevMask := d.Health(), d.slowMask
		for i := 0; len(data) > 0; i++ {
			flags := data[0]
			data = data[1:]
			s := Sample{At: at(i), RateOK: flags&1 != 0, TTFTOK: flags&2 != 0}
			if flags&0x80 != 0 && len(data) >= 16 {
				// Raw values: any float64 at all.
				s.Rate = math.Float64frombits(binary.LittleEndian.Uint64(data))
				s.TTFT = math.Float64frombits(binary.LittleEndian.Uint64(data[8:]))
				data = data[16:]
			} else if len(data) >= 2 {
				s.Rate, s.TTFT = fuzzValue(data[0]), fuzzValue(data[1])
				data = data[2:]
			} else {
				data = nil
			}
			changed := d.Observe(s)
			h := d.Health()
			checkWhole(t, d, c, h)
			// A change is of the state or of the signals a slow state names.
			if changed != (h.State != prev.State || d.slowMask != prevMask) {
				t.Fatalf("request %d: changed %v, from %v %q to %v %q", i, changed, prev.State, prev.Reason, h.State, h.Reason)
			}
			prev, prevMask = h, d.slowMask
		}
	})
}

func checkWhole(t *testing.T, d *Detector, c Config, h Health) {
	t.Helper()
	if h.State > Slow || h.Reason == "" || d.State() != h.State {
		t.Fatalf("health %+v", h)
	}
	anySlow, anyReady := false, false
	for k := range d.sig {
		g := &d.sig[k]
		anySlow = anySlow || g.slow
		anyReady = anyReady || g.ready(&d.p)
		if g.baseN < 0 || int(g.baseN) > c.Baseline || g.recentN < 0 || int(g.recentN) > c.Lag || g.drop < 0 || g.drop > g.recentN {
			t.Fatalf("signal %d: sizes base %d recent %d drop %d", k, g.baseN, g.recentN, g.drop)
		}
		for i := int32(1); i < g.baseN; i++ {
			if !(g.base[i-1] <= g.base[i]) {
				t.Fatalf("signal %d: baseline unsorted at %d: %v", k, i, g.base[:g.baseN])
			}
		}
		if !(g.evidence >= 0 && g.evidence < c.Evidence) {
			t.Fatalf("signal %d: evidence %v", k, g.evidence)
		}
		if g.baseN > 0 && !(g.invVar > 0 && !math.IsInf(g.invVar, 0) && !math.IsNaN(g.med)) {
			t.Fatalf("signal %d: median %v, 1/σ² %v", k, g.med, g.invVar)
		}
		if g.slow && !g.ready(&d.p) {
			t.Fatalf("signal %d: slow without a baseline", k)
		}
	}
	want := InsufficientData
	switch {
	case anySlow:
		want = Slow
	case anyReady:
		want = OK
	}
	if h.State != want {
		t.Fatalf("state %v, want %v from the signals", h.State, want)
	}
	inRange := func(ok bool, v float64) bool {
		return !ok || v >= minValue*(1-1e-5) && v <= maxValue*(1+1e-5)
	}
	for _, l := range []Levels{h.Baseline, h.Current} {
		if !inRange(l.RateOK, l.Rate) || !inRange(l.TTFTOK, l.TTFT) {
			t.Fatalf("levels %+v outside the accepted range", l)
		}
	}
	if d.ignored < 0 || d.ignored > 2*d.requests || h.SinceRequest > d.requests || h.SinceRequest < 1 && d.requests > 0 {
		t.Fatalf("counters: ignored %d, requests %d, since request %d", d.ignored, d.requests, h.SinceRequest)
	}
}
