//go:build race

package otelexport

// raceEnabled: the race detector's instrumentation allocates, so the
// allocation tests skip under it.
const raceEnabled = true
