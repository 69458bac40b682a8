package drift

import (
	"math"
	"time"
	"unsafe"
)

// Sample is what one finished request tells the detector. Either signal
// may be absent: a non-streamed request has neither, an errored one may
// have a first token but no rate.
type Sample struct {
	// At is when the request finished, by the caller's clock; it only
	// dates the state changes (Health.Since), the test counts requests.
	At time.Time
	// Rate is the request's output tokens per second, if RateOK.
	Rate   float64
	RateOK bool
	// TTFT is the request's time to first token in seconds, if TTFTOK.
	TTFT   float64
	TTFTOK bool
}

// The range of values taken, as in package stats: outside it (and zero,
// negatives, NaN, infinities, which have no logarithm) a value is a
// measurement fault, ignored and counted.
const (
	minValue = 1e-9
	maxValue = 1e12
)

// params are a Config turned into what Observe uses.
type params struct {
	set                                 bool
	baseline, minBaseline, lag, current int32
	// evidence is Config.Evidence; cap is the most one request adds or
	// takes away, Evidence/MinRun.
	evidence, cap float64
	sig           [numSignals]sigParams
}

func newParams(c Config) params {
	p := params{
		set:         true,
		baseline:    int32(c.Baseline),
		minBaseline: int32(c.MinBaseline),
		lag:         int32(c.Lag),
		current:     int32(c.Current),
		evidence:    c.Evidence,
		cap:         c.Evidence / float64(c.MinRun),
	}
	p.sig[rate] = newSigParams(-1, -math.Log(1-c.RateDrop))
	p.sig[ttft] = newSigParams(+1, math.Log(1+c.TTFTRise))
	return p
}

var defaultParams = newParams(DefaultConfig)

// Detector watches one row for a slowdown against its own earlier
// requests. It is not safe for concurrent use: the row's owner calls it
// under the row's lock. The zero value is ready to use with DefaultConfig.
//
// Its memory is fixed, StateBytes: for each of the two signals,
// MaxBaseline baseline values (a float32 and an age byte each) and MaxLag
// recent float32 values, that is 2 × (5·MaxBaseline + 4·MaxLag) bytes,
// plus the derived thresholds and a few counters. Nothing grows, and
// Observe allocates nothing.
type Detector struct {
	p   params
	sig [numSignals]signal
	// requests counts Observe calls, ignored the values that were faults.
	requests, ignored int64
	state             State
	// slowMask has bit k set when signal k is slow.
	slowMask uint8
	// since and sinceRequest date the start of state.
	since        time.Time
	sinceRequest int64
}

// StateBytes is the size of a Detector: what each row pays for its health.
const StateBytes = unsafe.Sizeof(Detector{})

// New returns a Detector for c, or c's error.
func New(c Config) (*Detector, error) {
	d := new(Detector)
	if err := d.Init(c); err != nil {
		return nil, err
	}
	return d, nil
}

// Init resets d to an empty detector for c, in place (a row embeds its
// Detector by value), or returns c's error and leaves d as it was.
func (d *Detector) Init(c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	*d = Detector{p: newParams(c.withDefaults())}
	return nil
}

// Observe feeds one finished request and reports whether the health
// changed: its State, or which signals a slow state names. It allocates
// nothing.
func (d *Detector) Observe(s Sample) (changed bool) {
	if !d.p.set {
		d.p = defaultParams
	}
	d.requests++
	if d.requests == 1 {
		d.since, d.sinceRequest = s.At, 1
	}
	d.feed(rate, s.Rate, s.RateOK)
	d.feed(ttft, s.TTFT, s.TTFTOK)

	st, mask := InsufficientData, uint8(0)
	for k := range d.sig {
		g := &d.sig[k]
		switch {
		case g.slow:
			st, mask = Slow, mask|1<<k
		case g.ready(&d.p) && st == InsufficientData:
			st = OK
		}
	}
	if st == d.state && mask == d.slowMask {
		return false
	}
	if st != d.state {
		d.since, d.sinceRequest = s.At, d.requests
	}
	d.state, d.slowMask = st, mask
	return true
}

func (d *Detector) feed(k signalKind, v float64, ok bool) {
	if !ok {
		return
	}
	if !(v >= minValue && v <= maxValue) { // NaN fails both
		d.ignored++
		return
	}
	d.sig[k].observe(math.Log(v), &d.p.sig[k], &d.p)
}

// Requests returns the number of requests observed.
func (d *Detector) Requests() int64 { return d.requests }

// Ignored returns the number of values (a request may carry two) that
// were present but not a possible rate or time: NaN, infinite, zero,
// negative, or outside [1e-9, 1e12]. They are counted rather than used,
// so one broken measurement cannot move a median.
func (d *Detector) Ignored() int64 { return d.ignored }
