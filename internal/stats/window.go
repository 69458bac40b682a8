package stats

import (
	"fmt"
	"time"
)

// Window is one of the sliding windows the stats keep: the last minute, the
// last 5 minutes, the last hour or the last day.
type Window uint8

// The windows.
const (
	Window1m Window = iota
	Window5m
	Window1h
	Window24h

	numWindows = int(iota)
)

// DefaultWindow is the window shown when none is asked for.
const DefaultWindow = Window5m

// windowInfo is a window's ring geometry: slices of slice each, count of
// them, so that count*slice is the window.
type windowInfo struct {
	name  string
	slice time.Duration
	count int
}

var windows = [numWindows]windowInfo{
	Window1m:  {"1m", 10 * time.Second, 6},
	Window5m:  {"5m", 30 * time.Second, 10},
	Window1h:  {"1h", 5 * time.Minute, 12},
	Window24h: {"24h", time.Hour, 24},
}

// dayAligned reports the period every slice length divides, so that a
// store whose origin is a multiple of it cuts its slices at the same wall
// clock moments as any other: series of several instances then line up
// slice by slice.
const dayAligned = 24 * time.Hour

// totalSlices is the number of slices a row keeps over all windows.
var totalSlices = func() int {
	n := 0
	for _, w := range windows {
		n += w.count
	}
	return n
}()

// ParseWindow parses "1m", "5m", "1h" or "24h".
func ParseWindow(s string) (Window, error) {
	for i, w := range windows {
		if w.name == s {
			return Window(i), nil
		}
	}
	return 0, fmt.Errorf("window %q: use 1m, 5m, 1h or 24h", s)
}

// String returns "1m", "5m", "1h" or "24h".
func (w Window) String() string {
	if int(w) < numWindows {
		return windows[w].name
	}
	return fmt.Sprintf("window(%d)", w)
}

// Duration is the window's length.
func (w Window) Duration() time.Duration { return windows[w].slice * time.Duration(windows[w].count) }

// Slice is the length of the window's time slices: the most of the oldest
// data that may already have left a view of the window.
func (w Window) Slice() time.Duration { return windows[w].slice }

// floorDiv divides rounding toward negative infinity, so that times before
// the store's origin still fall in well-ordered slices.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// mod is the non-negative remainder of a divided by n.
func mod(a int64, n int) int {
	r := int(a % int64(n))
	if r < 0 {
		r += n
	}
	return r
}
