package stats

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokentap/tokentap/internal/drift"
)

// DefaultMaxRows is the row cap when Options.MaxRows is 0: enough for, say,
// 25 models times 10 label values, within the memory bound (MemoryBound)
// that docs/live-stats.md states.
const DefaultMaxRows = 256

// Options configure a Store.
type Options struct {
	// MaxRows caps the rows; keys past it share the overflow row.
	// Default: DefaultMaxRows.
	MaxRows int
	// OnHealth, when set, is called with a row's key and health each time
	// the health changes (drift.Detector.Observe), after the row's lock is
	// released, on the recording request's goroutine: it must be quick
	// and must not record into the store.
	OnHealth func(k Key, h drift.Health)
	// Origin is where the store's time slices start. Default: the last
	// UTC midnight before the store is made, so that every instance cuts
	// its slices at the same moments and their series merge slice by
	// slice. Tests set it to place records in chosen slices.
	Origin time.Time
}

// Store is the live stats of one process: rows of sliding windows, safe for
// concurrent use. Recording takes a read lock on the row table and the
// row's own lock, so requests of different rows do not contend.
type Store struct {
	maxRows  int
	origin   time.Time
	onHealth func(Key, drift.Health)
	seed     maphash.Seed

	mu    sync.RWMutex
	rows  map[uint64]*row
	nrows int
	// overflow takes every key past maxRows.
	overflow *row
	// noIdleBefore is, when the table is full, the earliest time (since the
	// origin) at which some row may have gone idle, so that a full table
	// is not scanned for every new key.
	noIdleBefore atomic.Int64

	invalid atomic.Int64
}

// NewStore returns an empty Store.
func NewStore(o Options) *Store {
	if o.MaxRows <= 0 {
		o.MaxRows = DefaultMaxRows
	}
	if o.Origin.IsZero() {
		// Subtracting from Now keeps its monotonic reading, which since
		// relies on.
		now := time.Now()
		o.Origin = now.Add(-time.Duration(now.UnixNano() % int64(dayAligned)))
	}
	return &Store{
		maxRows:  o.MaxRows,
		origin:   o.Origin,
		onHealth: o.OnHealth,
		seed:     maphash.MakeSeed(),
		rows:     make(map[uint64]*row, o.MaxRows),
		overflow: newRow(overflowKey, true),
	}
}

// since is t in nanoseconds since the origin, on the monotonic clock when
// both carry it, so that a step of the wall clock does not move requests
// between slices.
func (s *Store) since(t time.Time) int64 { return int64(t.Sub(s.origin)) }

// Record adds one finished request, which ended at end, to its row, and
// returns the row's health after it (drift.InsufficientData for the
// overflow row, whose requests are of many models). It allocates nothing
// when the row exists and its health does not change. k's labels must be
// sorted by name; Record sorts them in place if they are not.
func (s *Store) Record(k *Key, smp *Sample, end time.Time) drift.State {
	k.normalize()
	t := s.since(end)
	h := k.hash(s.seed)
	for {
		r, gen := s.lookup(k, h, t, smp.Drift)
		r.mu.Lock()
		if r.gen != gen {
			// Reused for another key between the lookup and the lock.
			r.mu.Unlock()
			continue
		}
		if n := r.record(smp, t); n > 0 {
			s.invalid.Add(int64(n))
		}
		if smp.RateLimit != nil {
			r.headroom.note(smp.RateLimit, end)
		}
		var changed bool
		var health drift.Health
		state := drift.InsufficientData
		if !r.overflow {
			changed = r.health.Observe(drift.Sample{
				At:   end,
				Rate: smp.values[OutputTokensPerSecond], RateOK: smp.observed[OutputTokensPerSecond],
				TTFT: smp.values[TimeToFirstToken], TTFTOK: smp.observed[TimeToFirstToken],
			})
			state = r.health.State()
			if changed && s.onHealth != nil {
				health = r.health.Health()
			}
		}
		key := r.key
		r.mu.Unlock()
		if changed && s.onHealth != nil {
			s.onHealth(key, health)
		}
		return state
	}
}

// Invalid counts values that were dropped because they were out of range
// (negative, NaN, infinite or beyond 1e12): measurement faults.
func (s *Store) Invalid() int64 { return s.invalid.Load() }

// lookup returns k's row and its generation, creating or reusing a row if
// the table has room, else the overflow row.
func (s *Store) lookup(k *Key, h uint64, now int64, cfg *drift.Config) (*row, uint64) {
	s.mu.RLock()
	for r := s.rows[h]; r != nil; r = r.next {
		if k.equal(&r.key) {
			gen := r.gen
			s.mu.RUnlock()
			return r, gen
		}
	}
	full := s.nrows >= s.maxRows && now < s.noIdleBefore.Load()
	s.mu.RUnlock()
	if full {
		return s.overflow, 0
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	for r := s.rows[h]; r != nil; r = r.next {
		if k.equal(&r.key) {
			return r, r.gen
		}
	}
	if s.nrows < s.maxRows {
		r := newRow(k.stored(), false)
		r.initHealth(cfg)
		r.next = s.rows[h]
		s.rows[h] = r
		s.nrows++
		return r, r.gen
	}
	if r := s.reuseIdle(k, h, now, cfg); r != nil {
		return r, r.gen
	}
	return s.overflow, 0
}

// reuseIdle finds a row that has been idle for the longest window, moves it
// to k and returns it, or records when the next row can go idle and
// returns nil. The caller holds s.mu for writing.
func (s *Store) reuseIdle(k *Key, h uint64, now int64, cfg *drift.Config) *row {
	earliest := int64(1<<63 - 1)
	span := int64(windows[Window1h].slice) * int64(windows[Window1h].count+1)
	for bucket, r := range s.rows {
		for prev, cur := (*row)(nil), r; cur != nil; prev, cur = cur, cur.next {
			cur.mu.Lock()
			if !cur.idle(now) {
				if at := cur.last + span; at < earliest {
					earliest = at
				}
				cur.mu.Unlock()
				continue
			}
			// Unlink from its bucket, relink under k's hash.
			if prev == nil {
				if cur.next == nil {
					delete(s.rows, bucket)
				} else {
					s.rows[bucket] = cur.next
				}
			} else {
				prev.next = cur.next
			}
			cur.reuse(k.stored(), cfg)
			cur.next = s.rows[h]
			s.rows[h] = cur
			cur.mu.Unlock()
			return cur
		}
	}
	s.noIdleBefore.Store(earliest)
	return nil
}

// Rows returns the number of rows, the overflow row not counted.
func (s *Store) Rows() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nrows
}

// Aggregate merges each row's slices that window w covers at now into one
// sketch per metric. Rows without a request in the window are left out.
func (s *Store) Aggregate(w Window, now time.Time) *Aggregate {
	return s.aggregate(w, now, false)
}

func (s *Store) aggregate(w Window, now time.Time, series bool) *Aggregate {
	s.mu.RLock()
	rows := make([]*row, 0, s.nrows+1)
	for _, r := range s.rows {
		for ; r != nil; r = r.next {
			rows = append(rows, r)
		}
	}
	s.mu.RUnlock()
	rows = append(rows, s.overflow)

	t := s.since(now)
	a := newAggregate(w)
	for _, r := range rows {
		var ar AggregateRow
		r.mu.Lock()
		ar.Key, ar.Overflow = r.key, r.overflow
		if !r.overflow {
			ar.Health, ar.HasHealth = r.health.Health(), true
		}
		ar.Headroom = r.headroom
		r.view(w, t, &ar)
		r.viewInflight(w, t, &ar)
		r.viewStrata(w, t, &ar)
		if series && ar.Counts.Requests > 0 {
			r.viewSeries(w, t, s.origin, &ar)
		}
		r.mu.Unlock()
		if ar.Counts.Requests > 0 {
			a.add(&ar)
		}
	}
	return a
}
