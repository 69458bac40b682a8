package loadgen

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/tokentap/tokentap/simulator"
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
	base := startSimulator(t, simulator.Handler{})
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
		rep, err := RunSweep(context.Background(), Config{URL: base + "/v1", Models: []string{"fast", "slow"}, Requests: 16, Warmup: 2}, sw)
		if err != nil {
			t.Fatal(err)
		}
		for i, level := range rep.Levels {
			if level.Concurrency != int(sw.Levels[i]) {
				t.Errorf("level %d: concurrency %d, want %g", i, level.Concurrency, sw.Levels[i])
			}
			for j, w := range []modelWant{{model: "fast", ttft: fastTTFT, rate: fastRate}, {model: "slow", ttft: slowTTFT, rate: slowRate}} {
				checkSpeed(t, level.Models[j], w)
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
