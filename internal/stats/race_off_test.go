//go:build !race

package stats

// raceEnabled: see race_on_test.go.
const raceEnabled = false
