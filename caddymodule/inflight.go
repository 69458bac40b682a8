package caddymodule

import (
	"sync"
	"sync/atomic"
)

// maxInflightKeys bounds the in-flight table: request models come from
// clients, so their number is not ours to trust. Past the bound, new pairs
// share one overflow counter.
const maxInflightKeys = 4096

type inflightKey struct {
	upstream string
	port     int
	model    string
}

type inflightCounter struct{ n atomic.Int64 }

var inflight = struct {
	sync.Map // inflightKey -> *inflightCounter
	keys     atomic.Int64
	overflow inflightCounter
}{}

// inflightFor returns the counter of requests in flight to one upstream and
// model. It is called once per request, not per write; the common case is a
// lock-free sync.Map hit.
func inflightFor(upstream string, port int, model string) *inflightCounter {
	k := inflightKey{upstream, port, model}
	if c, ok := inflight.Load(k); ok {
		return c.(*inflightCounter)
	}
	if inflight.keys.Load() >= maxInflightKeys {
		return &inflight.overflow
	}
	c, loaded := inflight.LoadOrStore(k, new(inflightCounter))
	if !loaded {
		inflight.keys.Add(1)
	}
	return c.(*inflightCounter)
}
