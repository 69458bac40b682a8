package drift

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// State is a row's health.
type State uint8

const (
	// InsufficientData: no signal has a baseline yet (Config.Lag +
	// Config.MinBaseline requests carrying it).
	InsufficientData State = iota
	// OK: at least one signal is judged and none is slow.
	OK
	// Slow: a signal is significantly worse than its baseline. Not
	// "degraded": that word names measurement faults elsewhere.
	Slow
)

var stateNames = [...]string{"insufficient_data", "ok", "slow"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// MarshalText gives the JSON form, the same as String.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Levels are the p50 of each signal over some requests, each with whether
// there was any.
type Levels struct {
	// Rate is the p50 of output tokens/s.
	Rate   float64
	RateOK bool
	// TTFT is the p50 of time to first token, in seconds.
	TTFT   float64
	TTFTOK bool
}

// Health is a row's verdict, for the stats API.
type Health struct {
	State State
	// Since is the Sample.At of the request that entered State (the
	// row's first request for InsufficientData), and SinceRequest its
	// number, counting from 1.
	Since        time.Time
	SinceRequest int64
	// Reason says in words why, naming the slow signals.
	Reason string
	// Baseline is the median of each signal's baseline (frozen while the
	// signal is slow), present once the signal is judged.
	Baseline Levels
	// Current is the median of each signal's Config.Current latest
	// requests.
	Current Levels
}

// Health returns the row's verdict. Unlike Observe it allocates, for the
// reason's text: it is called when the stats are read, not per request.
func (d *Detector) Health() Health {
	p := &d.p
	if !p.set {
		p = &defaultParams
	}
	h := Health{State: d.state, Since: d.since, SinceRequest: d.sinceRequest}
	var base, cur [numSignals]float64
	var baseOK, curOK [numSignals]bool
	for k := range d.sig {
		g := &d.sig[k]
		if g.ready(p) {
			base[k], baseOK[k] = math.Exp(g.med), true
		}
		if c, ok := g.current(p.current, p); ok {
			cur[k], curOK[k] = math.Exp(c), true
		}
	}
	h.Baseline = Levels{Rate: base[rate], RateOK: baseOK[rate], TTFT: base[ttft], TTFTOK: baseOK[ttft]}
	h.Current = Levels{Rate: cur[rate], RateOK: curOK[rate], TTFT: cur[ttft], TTFTOK: curOK[ttft]}

	var b strings.Builder
	switch d.state {
	case Slow:
		for k := range d.sig {
			if d.slowMask&(1<<k) == 0 {
				continue
			}
			if b.Len() > 0 {
				b.WriteString("; ")
			}
			// A slow signal has a baseline, and a current value since it
			// was judged on one.
			change := cur[k]/base[k] - 1
			b.WriteString("p50 " + signalNames[k] + " " + number(cur[k]) + units[k] + ", ")
			b.WriteString(strconv.Itoa(int(math.Round(100*math.Abs(change)))) + " %")
			if change < 0 {
				b.WriteString(" below")
			} else {
				b.WriteString(" above")
			}
			b.WriteString(" its baseline of " + number(base[k]) + units[k])
			// The flag rests on the evidence of every request since the
			// sum began to grow; the median of the latest few can lag it
			// at the start or lead it at the end, and saying so keeps the
			// reason from contradicting the state.
			if worse := change < 0 == (signalKind(k) == rate); !worse {
				b.WriteString(" (the median of the latest requests does not show it yet, or no longer)")
			}
		}
	case OK:
		var judged []string
		for k := range d.sig {
			if baseOK[k] {
				judged = append(judged, signalNames[k])
			}
		}
		b.WriteString(strings.Join(judged, " and ") + " within thresholds of the baseline")
	default:
		need := int(p.lag + p.minBaseline)
		b.WriteString("a baseline needs " + strconv.Itoa(need) + " requests with " +
			signalNames[rate] + " or " + signalNames[ttft] + "; the row has " +
			strconv.Itoa(int(d.sig[rate].baseN+d.sig[rate].recentN)) + " and " +
			strconv.Itoa(int(d.sig[ttft].baseN+d.sig[ttft].recentN)))
	}
	h.Reason = b.String()
	return h
}

var (
	signalNames = [numSignals]string{rate: "output tokens/s", ttft: "time to first token"}
	units       = [numSignals]string{rate: "", ttft: " s"}
)

// number writes v with three significant digits, without exponent for the
// values rates and times take.
func number(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case v >= 0.001:
		return strconv.FormatFloat(v, 'f', 3-int(math.Ceil(math.Log10(v+1e-12))), 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
