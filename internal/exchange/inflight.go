package exchange

import (
	"sync"
	"sync/atomic"
)

// maxInflightKeys bounds the table: request models come from clients, so their
// number is not ours to trust. Past the bound, new pairs share one
// overflow counter, which then counts all of them together.
const maxInflightKeys = 4096

// inflightCounter is the number of requests in flight to one upstream and model.
type inflightCounter struct{ n atomic.Int64 }

// Begin counts a request in and returns how many were in flight before it.
func (c *inflightCounter) Begin() (ahead int64) { return c.n.Add(1) - 1 }

// End counts a request out. Every Begin needs exactly one End.
func (c *inflightCounter) End() { c.n.Add(-1) }

type inflightKey struct {
	upstream string
	port     int
	model    string
}

// inflights is the process's counters, process-wide on purpose: a Caddy
// reload starts new handlers while the old ones' streams run on, and both
// load the same upstream. An inflightTable of its own is for tests.
var inflights inflightTable

// inflightTable maps upstream and model to their Counter. Its zero value is ready
// to use.
type inflightTable struct {
	m        sync.Map // key -> *inflightCounter
	keys     atomic.Int64
	overflow inflightCounter
}

// inflightFor returns the process's counter for one upstream and model.
func inflightFor(upstream string, port int, model string) *inflightCounter {
	return inflights.For(upstream, port, model)
}

// For returns the counter for one upstream and model. It is called once
// per request, not per write; the common case is a lock-free sync.Map hit.
func (t *inflightTable) For(upstream string, port int, model string) *inflightCounter {
	k := inflightKey{upstream, port, model}
	if c, ok := t.m.Load(k); ok {
		return c.(*inflightCounter)
	}
	if t.keys.Load() >= maxInflightKeys {
		return &t.overflow
	}
	c, loaded := t.m.LoadOrStore(k, new(inflightCounter))
	if !loaded {
		t.keys.Add(1)
	}
	return c.(*inflightCounter)
}
