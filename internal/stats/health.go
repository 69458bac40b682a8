package stats

import (
	"fmt"
	"time"

	"github.com/tokentap/tokentap/internal/drift"
)

// HealthReport is a row's health in the JSON: whether the row has slowed
// down compared with its own earlier requests (package drift), now, not
// over the window.
type HealthReport struct {
	// State is "ok", "slow" or "insufficient_data".
	State string `json:"state"`
	// Since is when the row entered State.
	Since time.Time `json:"since"`
	// Reason says why, naming the slow signals and by how much.
	Reason string `json:"reason"`
	// Baseline and Current are the p50 of each signal over the row's
	// earlier requests (frozen while slow) and over its latest ones.
	Baseline HealthLevels `json:"baseline"`
	Current  HealthLevels `json:"current"`
}

// HealthLevels are p50s of the two signals, absent when unknown.
type HealthLevels struct {
	OutputTokensPerSecond *float64 `json:"output_tokens_per_second,omitempty"`
	TimeToFirstToken      *float64 `json:"time_to_first_token,omitempty"`
}

func healthReport(h *drift.Health) *HealthReport {
	return &HealthReport{
		State:    h.State.String(),
		Since:    h.Since.UTC(),
		Reason:   h.Reason,
		Baseline: healthLevels(&h.Baseline),
		Current:  healthLevels(&h.Current),
	}
}

func healthLevels(l *drift.Levels) HealthLevels {
	var out HealthLevels
	if l.RateOK {
		v := round(l.Rate)
		out.OutputTokensPerSecond = &v
	}
	if l.TTFTOK {
		v := round(l.TTFT)
		out.TimeToFirstToken = &v
	}
	return out
}

// health reads a HealthReport from another instance back, checking its
// state's name.
func (h *HealthReport) health() (drift.Health, error) {
	out := drift.Health{Since: h.Since, Reason: h.Reason}
	switch h.State {
	case "ok":
		out.State = drift.OK
	case "slow":
		out.State = drift.Slow
	case "insufficient_data":
		out.State = drift.InsufficientData
	default:
		return out, fmt.Errorf("health state %q: want ok, slow or insufficient_data", h.State)
	}
	read := func(l HealthLevels) drift.Levels {
		var d drift.Levels
		if v := l.OutputTokensPerSecond; v != nil {
			d.Rate, d.RateOK = *v, true
		}
		if v := l.TimeToFirstToken; v != nil {
			d.TTFT, d.TTFTOK = *v, true
		}
		return d
	}
	out.Baseline, out.Current = read(h.Baseline), read(h.Current)
	return out, nil
}

// EachHealth calls f with each row's key and current state, the overflow
// row left out, for a metrics gauge. It takes each row's lock in turn.
func (s *Store) EachHealth(f func(k Key, st drift.State)) {
	s.mu.RLock()
	rows := make([]*row, 0, s.nrows)
	for _, r := range s.rows {
		for ; r != nil; r = r.next {
			rows = append(rows, r)
		}
	}
	s.mu.RUnlock()
	for _, r := range rows {
		r.mu.Lock()
		k, st, n := r.key, r.health.State(), r.health.Requests()
		r.mu.Unlock()
		if n > 0 {
			f(k, st)
		}
	}
}
