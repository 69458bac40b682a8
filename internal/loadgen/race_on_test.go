//go:build race

package loadgen

// raceEnabled: the race detector slows the code 5-20 times, which distorts
// the timings TestRunTiming checks.
const raceEnabled = true
