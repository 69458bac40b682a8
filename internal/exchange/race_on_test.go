//go:build race

package exchange

// raceEnabled: the race detector's instrumentation allocates, and drops a
// share of sync.Pool's items on purpose, so the allocation tests skip.
const raceEnabled = true
