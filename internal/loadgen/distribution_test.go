package loadgen

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestDistribution(t *testing.T) {
	for _, tc := range []struct {
		name string
		// ttfts are the completed requests' times to first token, each
		// with 11 tokens 10 ms apart (100 tok/s); failed adds failures.
		ttfts  []time.Duration
		failed int
		// want is the TTFT expected at some probabilities: DDSketch's
		// rank is p·(n−1), rounded down.
		want    map[float64]time.Duration
		wantNil bool
	}{
		{
			name:  "1 to 1000 ms",
			ttfts: msRange(1, 1000),
			want:  map[float64]time.Duration{0: 1 * time.Millisecond, 0.01: 10 * time.Millisecond, 0.5: 500 * time.Millisecond, 0.95: 950 * time.Millisecond, 0.999: 999 * time.Millisecond, 1: 1000 * time.Millisecond},
		},
		{
			name:  "one request: every point is its value",
			ttfts: []time.Duration{42 * time.Millisecond},
			want:  map[float64]time.Duration{0: 42 * time.Millisecond, 0.5: 42 * time.Millisecond, 1: 42 * time.Millisecond},
		},
		{
			name:   "failures are left out",
			ttfts:  msRange(100, 199),
			failed: 50,
			want:   map[float64]time.Duration{0: 100 * time.Millisecond, 1: 199 * time.Millisecond},
		},
		{name: "only failures: no distribution", failed: 3, wantNil: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agg := newAggregator(&Config{Models: []string{"m"}})
			for _, d := range tc.ttfts {
				agg.add(result("m", d, 10*time.Millisecond, 11))
			}
			for range tc.failed {
				agg.add(&Result{Model: "m", Start: time.Unix(100, 0), ErrorKind: ErrTransport})
			}
			m := agg.report(time.Unix(100, 0), time.Unix(200, 0), 0).Models[0]
			if tc.wantNil {
				if m.Distribution != nil {
					t.Fatalf("distribution %+v without a completed request", m.Distribution)
				}
				return
			}
			d := m.Distribution
			if d == nil {
				t.Fatal("no distribution")
			}
			for _, cdf := range [][]CDFPoint{d.TimeToFirstToken, d.OutputTokensPerSecond} {
				if len(cdf) != len(CDFProbabilities) {
					t.Fatalf("%d points, want one per probability (%d)", len(cdf), len(CDFProbabilities))
				}
				for i := 1; i < len(cdf); i++ {
					if cdf[i].P <= cdf[i-1].P || cdf[i].Value < cdf[i-1].Value {
						t.Errorf("not a CDF at %d (probabilities rising, values not falling): %+v", i, cdf)
						break
					}
				}
			}
			for _, p := range d.TimeToFirstToken {
				if w, ok := tc.want[p.P]; ok {
					if want := w.Seconds(); math.Abs(p.Value-want) > relativeAccuracy*want {
						t.Errorf("TTFT at p=%g: %v s, want %v within %.1f%%", p.P, p.Value, want, 100*relativeAccuracy)
					}
				}
			}
			for _, p := range d.OutputTokensPerSecond {
				if math.Abs(p.Value-100) > relativeAccuracy*100 {
					t.Errorf("tok/s at p=%g: %v, want 100 (every request's)", p.P, p.Value)
				}
			}
			js, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(js), `"distribution":{"time_to_first_token_seconds":[{"p":0,"value":`) {
				t.Errorf("JSON lacks the distribution: %s", js)
			}
		})
	}
}

func msRange(from, to int) []time.Duration {
	var out []time.Duration
	for i := from; i <= to; i++ {
		out = append(out, time.Duration(i)*time.Millisecond)
	}
	return out
}
