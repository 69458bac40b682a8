//go:build race

package drift

// raceEnabled shrinks the statistical measurements under -race, which is
// an order of magnitude slower; the bounds are still asserted, on fewer
// seeded runs.
const raceEnabled = true
