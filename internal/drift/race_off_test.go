//go:build !race

package drift

// raceEnabled: see race_on_test.go.
const raceEnabled = false
