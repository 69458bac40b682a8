package loadgen

import (
	"os"
	"testing"

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
