//go:build race

package stats

// raceEnabled: the race detector's instrumentation keeps the compiler from
// turning sketches-go's append(s, make(...)...) into an in-place extension,
// so a sketch cleared for a new slice allocates a temporary under -race only.
const raceEnabled = true
