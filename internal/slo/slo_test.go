package slo

import (
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/meter"
)

// stream is a completed exchange: first token at ttft, then 100 more
// tokens over decode (a rate of 100/decode), ending at end.
func stream(ttft, decode, end time.Duration) *meter.Measurement {
	return &meter.Measurement{
		Outcome:    meter.OutcomeCompleted,
		FirstToken: ttft, LastToken: ttft + decode, End: end,
		OutputEvents: 101,
		Usage:        meter.Usage{InputTokens: 10, OutputTokens: 101, Source: meter.UsageReported},
	}
}

func TestJudge(t *testing.T) {
	strict := Objective{TimeToFirstToken: 500 * time.Millisecond, OutputTokensPerSecond: 40, Duration: 5 * time.Second}
	outcome := func(m *meter.Measurement, o meter.Outcome) *meter.Measurement { m.Outcome = o; return m }
	tests := []struct {
		name string
		o    Objective
		m    *meter.Measurement
		want Verdict
	}{
		{"every threshold holds", strict, stream(200*time.Millisecond, 2*time.Second, 2300*time.Millisecond), Met},
		{"first token at the threshold meets", strict, stream(500*time.Millisecond, 2*time.Second, 3*time.Second), Met},
		{"first token late", strict, stream(600*time.Millisecond, 2*time.Second, 3*time.Second), Missed},
		{"rate too low (100 tokens in 4 s: 25/s)", strict, stream(200*time.Millisecond, 4*time.Second, 4300*time.Millisecond), Missed},
		{"rate exactly at the threshold (100 tokens in 2.5 s)", strict, stream(200*time.Millisecond, 2500*time.Millisecond, 2800*time.Millisecond), Met},
		{"too long", strict, stream(200*time.Millisecond, 2*time.Second, 6*time.Second), Missed},
		{"only a rate threshold ignores a slow start", Objective{OutputTokensPerSecond: 40}, stream(9*time.Second, 2*time.Second, 11*time.Second), Met},
		{"no first token misses a first-token threshold", strict, &meter.Measurement{Outcome: meter.OutcomeCompleted, End: time.Second}, Missed},
		{"a one-token answer has no rate to judge", Objective{OutputTokensPerSecond: 40}, &meter.Measurement{
			Outcome: meter.OutcomeCompleted, FirstToken: 100 * time.Millisecond, LastToken: 100 * time.Millisecond, End: 200 * time.Millisecond,
			OutputEvents: 1, Usage: meter.Usage{InputTokens: 5, OutputTokens: 1, Source: meter.UsageReported},
		}, Met},
		{"an upstream error misses", strict, outcome(stream(200*time.Millisecond, 2*time.Second, 2300*time.Millisecond), meter.OutcomeUpstreamError), Missed},
		{"a stream cut short misses", strict, outcome(stream(200*time.Millisecond, 2*time.Second, 2300*time.Millisecond), meter.OutcomeTruncated), Missed},
		{"a client abort is not judged", strict, outcome(stream(900*time.Millisecond, 2*time.Second, 2300*time.Millisecond), meter.OutcomeClientAbort), NotJudged},
		{"no objective judges nothing", Objective{}, stream(200*time.Millisecond, 2*time.Second, 2300*time.Millisecond), NotJudged},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.o.Judge(tt.m); got != tt.want {
				t.Errorf("Judge = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestTable(t *testing.T) {
	var tab Table
	fast := Objective{OutputTokensPerSecond: 80}
	all := Objective{TimeToFirstToken: time.Second}
	for _, r := range []struct {
		pattern string
		o       Objective
	}{{"gpt-4o-mini*", fast}, {"*", all}} {
		if err := tab.Add(r.pattern, r.o); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		model string
		want  Objective
	}{
		{"gpt-4o-mini-2024-07-18", fast},
		{"gpt-4o", all},
		{"", all},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			if got, ok := tab.Lookup(tt.model); !ok || got != tt.want {
				t.Errorf("Lookup(%q) = %+v, %v; want %+v", tt.model, got, ok, tt.want)
			}
		})
	}
	var none Table
	if _, ok := none.Lookup("gpt-4o"); ok || !none.Empty() {
		t.Error("an empty table has an objective")
	}
}

func TestAddRejects(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		o       Objective
		want    string
	}{
		{"no threshold", "*", Objective{}, "no threshold"},
		{"negative first token", "*", Objective{TimeToFirstToken: -time.Second}, "time_to_first_token -1s"},
		{"negative duration", "*", Objective{Duration: -time.Second}, "duration -1s"},
		{"negative rate", "m", Objective{OutputTokensPerSecond: -3}, "output_tokens_per_second -3"},
		{"empty pattern", "", Objective{Duration: time.Second}, "empty model pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tab Table
			err := tab.Add(tt.pattern, tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
