package exchange

import (
	"sync"
	"sync/atomic"
)

// lease keeps what a middleware's exchanges export through (Config.Release)
// until both the middleware is closed and its last in-flight exchange has
// ended. Caddy cleans up the old config as soon as a reload succeeds, while
// streams it started may run for minutes more; their spans and metric
// points must still be exported.
type lease struct {
	active  atomic.Int64
	closing atomic.Bool
	once    sync.Once
	release func()
}

func (l *lease) acquire() { l.active.Add(1) }

func (l *lease) done() {
	if l.active.Add(-1) == 0 && l.closing.Load() {
		l.once.Do(l.run)
	}
}

func (l *lease) close() {
	l.closing.Store(true)
	if l.active.Load() == 0 {
		l.once.Do(l.run)
	}
}

func (l *lease) run() {
	if l.release != nil {
		l.release()
	}
}
