// Package live keeps the exchanges in flight right now, per provider and
// model, and tells the ones that are waiting for their first byte, the ones
// receiving and the ones stalled: no byte for longer than their stall
// threshold. The windows of package stats speak when requests end; a stream
// that hangs for a minute is seen there a minute late, or never if the
// client gives up first. This is the view of an incident while it happens.
//
// A stream's clock is one atomic store per write of its response, to memory
// only that stream writes: the hot path shares nothing with other requests.
// Joining and leaving a provider and model's set takes that set's lock, once
// each per exchange; reading the counts walks every set under its lock, once
// per collection (a metrics scrape, a page refresh), not per request.
package live

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MaxKeys bounds the provider and model pairs kept: request models come from
// clients, so their number is not ours to trust. Past it, new pairs share
// one overflow set, counted under OverflowValue.
const MaxKeys = 1024

// OverflowValue is the provider and model of the overflow set, as the stats
// rows name theirs.
const OverflowValue = "_other"

// Linger is how long a set that emptied keeps being reported, with zeros,
// so that a gauge falls to 0 before its series goes away instead of
// stopping at its last value.
const Linger = 5 * time.Minute

// origin is the zero of the streams' clocks, monotonic: a wall clock step
// must not make every stream look stalled.
var origin = time.Now()

// since is t on the streams' clock; never 0, which means "no byte yet".
func since(t time.Time) int64 { return int64(t.Sub(origin)) | 1 }

// Key is what streams are counted by.
type Key struct {
	Provider, Model string
}

// Count is one key's streams at one instant. Waiting, Receiving and Stalled
// partition InFlight.
type Count struct {
	Key
	// InFlight counts exchanges whose response has begun and not ended.
	InFlight int64
	// Waiting counts those that have not had a byte of their body yet:
	// time to first token, or a body the upstream sends whole.
	Waiting int64
	// Receiving counts those that had a byte within their stall threshold.
	Receiving int64
	// Stalled counts those whose last byte is older than their stall
	// threshold.
	Stalled int64
}

// Stream is one exchange's entry. Its zero value is ready for Table.Join;
// it holds no allocation of its own, so it can live inside the exchange.
type Stream struct {
	set        *set
	prev, next *Stream
	threshold  int64
	// last is when the response last wrote a byte, on the streams'
	// clock; 0 before the first.
	last atomic.Int64
}

// Wrote marks a write of the response body at at. It is the only call on
// the hot path: one store, to this stream's own memory.
func (s *Stream) Wrote(at time.Time) { s.last.Store(since(at)) }

// Leave takes the stream out of its set; it may be called on a stream that
// never joined, and more than once.
func (s *Stream) Leave() {
	st := s.set
	if st == nil {
		return
	}
	st.mu.Lock()
	s.prev.next, s.next.prev = s.next, s.prev
	s.prev, s.next, s.set = nil, nil, nil
	st.n--
	st.emptied = since(time.Now())
	st.mu.Unlock()
}

// set is one key's streams: a ring through a sentinel, so that joining and
// leaving are pointer swaps and allocate nothing.
type set struct {
	key  Key
	mu   sync.Mutex
	ring Stream
	n    int64
	// emptied is when the set last lost a stream (the streams' clock).
	emptied int64
}

func newSet(k Key) *set {
	s := &set{key: k}
	s.ring.prev, s.ring.next = &s.ring, &s.ring
	return s
}

// Table is the process's streams in flight. Its zero value is ready to use;
// it is safe for concurrent use.
type Table struct {
	sets     sync.Map // Key -> *set
	keys     atomic.Int64
	overflow atomic.Pointer[set]
}

// Join adds s, whose response has just begun, to k's set, with the gap
// after which it counts as stalled (a threshold <= 0 never stalls). s must
// not be in a set already.
func (t *Table) Join(s *Stream, k Key, threshold time.Duration) {
	st := t.setFor(k)
	s.threshold = int64(threshold)
	s.last.Store(0)
	st.mu.Lock()
	s.set = st
	s.prev, s.next = st.ring.prev, &st.ring
	st.ring.prev.next = s
	st.ring.prev = s
	st.n++
	st.mu.Unlock()
}

// setFor returns k's set, creating it within MaxKeys. The common case is a
// lock-free sync.Map hit.
func (t *Table) setFor(k Key) *set {
	if v, ok := t.sets.Load(k); ok {
		return v.(*set)
	}
	if t.keys.Load() >= MaxKeys {
		if o := t.overflow.Load(); o != nil {
			return o
		}
		t.overflow.CompareAndSwap(nil, newSet(Key{OverflowValue, OverflowValue}))
		return t.overflow.Load()
	}
	// The key's strings may be views of a request's buffers: the set
	// keeps copies.
	stored := Key{strings.Clone(k.Provider), strings.Clone(k.Model)}
	v, loaded := t.sets.LoadOrStore(stored, newSet(stored))
	if !loaded {
		t.keys.Add(1)
	}
	return v.(*set)
}

// Counts calls yield with each key's streams at now, for every key with a
// stream in flight or that had one within Linger. The order is unspecified.
func (t *Table) Counts(now time.Time, yield func(Count)) {
	at := since(now)
	each := func(st *set) {
		c, ok := st.count(at)
		if ok {
			yield(c)
		}
	}
	t.sets.Range(func(_, v any) bool {
		each(v.(*set))
		return true
	})
	if st := t.overflow.Load(); st != nil {
		each(st)
	}
}

// count counts st's streams at at; ok is false when the set has been empty
// for longer than Linger.
func (st *set) count(at int64) (c Count, ok bool) {
	c.Key = st.key
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.n == 0 && at-st.emptied > int64(Linger) {
		return c, false
	}
	for s := st.ring.next; s != &st.ring; s = s.next {
		c.InFlight++
		last := s.last.Load()
		switch {
		case last == 0:
			c.Waiting++
		case s.threshold > 0 && at-last > s.threshold:
			c.Stalled++
		default:
			c.Receiving++
		}
	}
	return c, true
}
