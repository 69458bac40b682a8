package inflight

import (
	"sync"
	"sync/atomic"
)

// MaxKeys bounds the table: request models come from clients, so their
// number is not ours to trust. Past the bound, new pairs share one
// overflow counter, which then counts all of them together.
const MaxKeys = 4096

// Counter is the number of requests in flight to one upstream and model.
type Counter struct{ n atomic.Int64 }

// Begin counts a request in and returns how many were in flight before it.
func (c *Counter) Begin() (ahead int64) { return c.n.Add(1) - 1 }

// End counts a request out. Every Begin needs exactly one End.
func (c *Counter) End() { c.n.Add(-1) }

type key struct {
	upstream string
	port     int
	model    string
}

// table is the process's counters; a Table of its own is for tests.
var table Table

// Table maps upstream and model to their Counter. Its zero value is ready
// to use.
type Table struct {
	m        sync.Map // key -> *Counter
	keys     atomic.Int64
	overflow Counter
}

// For returns the process's counter for one upstream and model.
func For(upstream string, port int, model string) *Counter {
	return table.For(upstream, port, model)
}

// For returns the counter for one upstream and model. It is called once
// per request, not per write; the common case is a lock-free sync.Map hit.
func (t *Table) For(upstream string, port int, model string) *Counter {
	k := key{upstream, port, model}
	if c, ok := t.m.Load(k); ok {
		return c.(*Counter)
	}
	if t.keys.Load() >= MaxKeys {
		return &t.overflow
	}
	c, loaded := t.m.LoadOrStore(k, new(Counter))
	if !loaded {
		t.keys.Add(1)
	}
	return c.(*Counter)
}
