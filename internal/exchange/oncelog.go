package exchange

import "sync"

// maxLoggedOnce bounds the keys onceLog remembers, so that a stream of
// made-up model names cannot grow the set without end; past it nothing
// more is logged.
const maxLoggedOnce = 1000

// onceLog remembers what was logged already, for the warnings that would
// otherwise repeat on every request (a model without a price, a degraded
// measurement).
type onceLog struct {
	mu   sync.Mutex
	seen map[[2]string]struct{}
}

// first reports whether the warning of kind about key is new, remembering
// it.
func (l *onceLog) first(kind, key string) bool {
	k := [2]string{kind, key}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, seen := l.seen[k]; seen || len(l.seen) >= maxLoggedOnce {
		return false
	}
	if l.seen == nil {
		l.seen = map[[2]string]struct{}{}
	}
	l.seen[k] = struct{}{}
	return true
}
