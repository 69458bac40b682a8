//go:build race

package drift

// raceEnabled skips the statistical measurements under -race, which is an
// order of magnitude slower; CI runs them without it, at full size.
const raceEnabled = true
