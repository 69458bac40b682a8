//go:build race

package simulator

// raceEnabled: the race detector slows the code 5-20 times, which distorts
// the very schedule the timing tests check.
const raceEnabled = true
