package loadgen

import (
	"context"
	"math"
	"os"
	"sync"
	"testing"
	"time"
)

// The sweep's bounds: what the sketch's 1 % bins and a quiet machine's
// timer and loopback add (docs/load-testing.md, "Load shapes").
const (
	sweepTTFTSlack = 5 * time.Millisecond
	sweepRateSlack = 0.03
)

// TestRunTiming checks how close the client's figures and a run's length
// come to the simulator's schedule: the wall-clock bounds TestRun and
// TestRunBounds leave out, since they need the machine to itself.
func TestRunTiming(t *testing.T) {
	if raceEnabled || os.Getenv("TOKENTAP_TIMING_TESTS") != "1" {
		// Other packages' tests share the cores under `go test ./...`,
		// and the race detector slows the measured code 5-20 times.
		t.Skip("set TOKENTAP_TIMING_TESTS=1 and run alone, without -race (as .ci/run does)")
	}
	// The simulator runs in a process of its own, as a server would.
	base := startSimulatorProcess(t)
	for _, tc := range speedRuns {
		t.Run(tc.name, func(t *testing.T) {
			rep, _ := tc.run(t, base)
			for i, w := range tc.want {
				checkSpeed(t, rep.Models[i], w)
			}
		})
	}
	t.Run("a concurrency sweep: the configured speeds at every level", func(t *testing.T) {
		sw, err := ParseSweep("concurrency=1,2,4,8")
		if err != nil {
			t.Fatal(err)
		}
		// Each level's requests, in the order they finished: the levels run
		// one after another, so level i's are results[i*perLevel:].
		const requests, warmup = 32, 2
		const perLevel = requests + warmup
		var mu sync.Mutex
		var results []*Result
		keep := func(r *Result) {
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
		}
		rep, err := RunSweep(context.Background(), Config{URL: base + "/v1", Models: []string{"fast", "slow"}, Requests: requests, Warmup: warmup, OnResult: keep}, sw)
		if err != nil {
			t.Fatal(err)
		}
		if len(results) != perLevel*len(sw.Levels) {
			t.Fatalf("%d results, want %d a level", len(results), perLevel)
		}
		for i, level := range rep.Levels {
			if level.Concurrency != int(sw.Levels[i]) {
				t.Errorf("level %d: concurrency %d, want %g", i, level.Concurrency, sw.Levels[i])
			}
			for j, w := range []modelWant{{model: "fast", ttft: fastTTFT, rate: fastRate}, {model: "slow", ttft: slowTTFT, rate: slowRate}} {
				m := level.Models[j]
				// Alone and without -race the client's figures come within
				// the sketch's resolution of the schedule (bins 1 % wide)
				// plus the loopback's and the timer's lateness.
				ttft := time.Duration(m.TimeToFirstToken.P50 * float64(time.Second))
				if ttft < w.ttft*99/100 || ttft > w.ttft+sweepTTFTSlack {
					t.Errorf("concurrency %d, %s: time to first token p50 %v, want %v (+ at most %v)", level.Concurrency, m.Model, ttft, w.ttft, sweepTTFTSlack)
				}
				if r := m.OutputTokensPerSecond.P50; math.Abs(r-w.rate)/w.rate > sweepRateSlack {
					t.Errorf("concurrency %d, %s: output tokens/s p50 %.1f, want %.1f ± %.0f %%", level.Concurrency, m.Model, r, w.rate, sweepRateSlack*100)
					logLevelRequests(t, results[i*perLevel:(i+1)*perLevel], m.Model)
				}
				t.Logf("concurrency %d, %s: time to first token p50 %.2f ms (simulator %v), output tokens/s p50 %.2f (simulator %g)",
					level.Concurrency, m.Model, m.TimeToFirstToken.P50*1e3, w.ttft, m.OutputTokensPerSecond.P50, w.rate)
			}
		}
	})
	t.Run("a replay of Mooncake's trace: every arrival within 5 ms, every recorded length", func(t *testing.T) {
		late, lengths, recs := replayTiming(t, base)
		for i := range recs {
			if late[i] < 0 || late[i] > 5*time.Millisecond || lengths[i] != recs[i].OutputTokens {
				t.Errorf("request %d: started %v after its offset, %d output tokens; want within 5 ms and %d", i, late[i], lengths[i], recs[i].OutputTokens)
			}
		}
		t.Logf("start lateness: %v", late)
	})
	for _, tc := range boundsCases {
		t.Run(tc.name, func(t *testing.T) {
			rep, _, took := tc.run(t, base)
			if n := rep.Total.Requests; n < tc.minOnTime {
				t.Errorf("%d requests, want at least %d", n, tc.minOnTime)
			}
			if took > tc.maxElapsed {
				t.Errorf("the run took %v, want at most %v", took, tc.maxElapsed)
			}
		})
	}
}

// logLevelRequests logs each request of one level for model: when it
// started, from the level's first start, its time to first token, its
// decode rate, and its longest gap between tokens and when that gap
// ended. A rate off its bound is the simulator, the loopback or this
// process falling behind; these show whether one stall of the machine
// hit several requests at once or each was slow on its own.
func logLevelRequests(t *testing.T, level []*Result, model string) {
	t.Helper()
	var first time.Time
	for _, r := range level {
		if first.IsZero() || r.Start.Before(first) {
			first = r.Start
		}
	}
	for _, r := range level {
		if r.Model != model || r.Warmup {
			continue
		}
		var gap, at, sum time.Duration
		for _, g := range r.Gaps {
			sum += g
			if g > gap {
				gap, at = g, r.FirstToken+sum
			}
		}
		t.Logf("  request %2d: started at %8v, first token %8v, %6.1f tokens/s, longest gap %v ending at %v",
			r.Seq, r.Start.Sub(first).Round(time.Microsecond), r.FirstToken.Round(time.Microsecond), r.OutputTokensPerSecond(),
			gap.Round(time.Microsecond), (r.Start.Sub(first) + at).Round(time.Microsecond))
	}
}
