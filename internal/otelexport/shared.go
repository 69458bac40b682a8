package otelexport

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// shared is a process-wide value built by its first holder and shut down
// by its last. Caddy provisions a new handler for every config load and
// cleans up the old one afterwards, so a provider per handler would drop
// or duplicate spans on each reload and restart cumulative metrics;
// instead handlers share one, counted, and the last to go flushes it.
type shared[V any] struct {
	// what names the value in the log line of a failed shutdown.
	what string

	mu    sync.Mutex
	refs  int
	value V
	stop  func(context.Context) error
}

// shutdownTimeout bounds the last holder's flush, so that unloading a
// config never hangs on an unreachable collector.
const shutdownTimeout = 5 * time.Second

// acquire returns the shared value, calling build for it when there is no
// holder, and a release function that is safe to call more than once.
// stop, which build returns, may be nil: nothing to shut down.
func (s *shared[V]) acquire(logger *zap.Logger, build func() (v V, stop func(context.Context) error, err error)) (V, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs == 0 {
		v, stop, err := build()
		if err != nil {
			var zero V
			return zero, nil, err
		}
		s.value, s.stop = v, stop
	}
	s.refs++
	var once sync.Once
	return s.value, func() { once.Do(func() { s.release(logger) }) }, nil
}

func (s *shared[V]) release(logger *zap.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs--
	if s.refs > 0 {
		return
	}
	stop := s.stop
	var zero V
	s.value, s.stop = zero, nil
	if stop == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := stop(ctx); err != nil {
		logger.Warn("shutting down the "+s.what, zap.Error(err))
	}
}

// holders is how many holders the value has now.
func (s *shared[V]) holders() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refs
}
