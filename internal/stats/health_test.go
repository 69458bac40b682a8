package stats

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/drift"
)

// TestRecordHealth: a row's detector sees every request; Record returns
// the row's state, OnHealth hears each change once, and the report shows
// the row's health, with the reason naming the slow signal.
func TestRecordHealth(t *testing.T) {
	type change struct {
		model string
		state drift.State
	}
	var changes []change
	s := NewStore(Options{Origin: origin, OnHealth: func(k Key, h drift.Health) {
		changes = append(changes, change{k.Model, h.State})
	}})
	k := key("openai", "gpt-a")
	var slowAt, states = -1, map[drift.State]int{}
	for i := range 400 {
		tps := 100.0 * (1 + 0.1*float64(i%5-2)/2) // ±10 % jitter
		if i >= 200 && i < 300 {
			tps *= 0.5 // halved for 100 requests
		}
		smp := only(OutputTokensPerSecond, tps)
		smp.Set(TimeToFirstToken, 0.2)
		st := s.Record(&k, &smp, at(time.Duration(i)*time.Second))
		states[st]++
		if st == drift.Slow && slowAt < 0 {
			slowAt = i
		}
	}
	if slowAt < 200 || slowAt > 230 {
		t.Errorf("flagged slow at request %d, want within 30 of the drop at 200", slowAt)
	}
	var seq []drift.State
	for _, c := range changes {
		if c.model != "gpt-a" {
			t.Errorf("a change for %q", c.model)
		}
		seq = append(seq, c.state)
	}
	want := []drift.State{drift.OK, drift.Slow, drift.OK}
	if len(seq) != len(want) || seq[0] != want[0] || seq[1] != want[1] || seq[2] != want[2] {
		t.Errorf("changes %v, want %v (each once)", seq, want)
	}

	// Now slow again, and the report says so.
	for i := 400; i < 460; i++ {
		smp := only(OutputTokensPerSecond, 40)
		s.Record(&k, &smp, at(time.Duration(i)*time.Second))
	}
	now := at(460 * time.Second)
	rep := s.Aggregate(Window1h, now).Report(now)
	h := rep.Rows[0].Health
	if h == nil || h.State != "slow" || !strings.Contains(h.Reason, "output tokens/s") || h.Baseline.OutputTokensPerSecond == nil || h.Current.OutputTokensPerSecond == nil ||
		*h.Current.OutputTokensPerSecond > 0.5**h.Baseline.OutputTokensPerSecond {
		b, _ := json.Marshal(h)
		t.Errorf("health %s, want slow, naming output tokens/s, current below half the baseline", b)
	}
}

// TestMergeHealth: the worse state wins across instances, and between
// equal states the earlier since.
func TestMergeHealth(t *testing.T) {
	row := func(st drift.State, since time.Duration) *AggregateRow {
		return &AggregateRow{Key: key("p", "m"), Health: drift.Health{State: st, Since: at(since)}, HasHealth: true}
	}
	tests := []struct {
		name      string
		a, b      *AggregateRow
		wantState drift.State
		wantSince time.Duration
	}{
		{"slow beats ok", row(drift.OK, 0), row(drift.Slow, 5*time.Second), drift.Slow, 5 * time.Second},
		{"ok beats too little data", row(drift.InsufficientData, 0), row(drift.OK, 9*time.Second), drift.OK, 9 * time.Second},
		{"two slow: the earlier", row(drift.Slow, 7*time.Second), row(drift.Slow, 3*time.Second), drift.Slow, 3 * time.Second},
		{"one without health", row(drift.OK, 2*time.Second), &AggregateRow{Key: key("p", "m")}, drift.OK, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAggregate(Window5m)
			a.add(tt.a)
			a.add(tt.b)
			got := a.Rows()[0].Health
			if got.State != tt.wantState || !got.Since.Equal(at(tt.wantSince)) {
				t.Errorf("merged %v since %v, want %v since %v", got.State, got.Since, tt.wantState, at(tt.wantSince))
			}
		})
	}
}
