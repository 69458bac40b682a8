//go:build race

package caddymodule

// raceEnabled: the race detector slows the code 5-20 times, which distorts
// the very timings TestTimingAccuracy checks.
const raceEnabled = true
