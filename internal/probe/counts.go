package probe

import (
	"expvar"
	"sync"
	"sync/atomic"
)

// Counts are a target's probes by what became of them.
type Counts struct {
	n [numKinds]atomic.Int64
}

type kind int

const (
	sent     kind = iota // started
	failed               // ended without completing (timeout, error status, broken or truncated stream)
	skipped              // ticks that found the previous probe still in flight
	canceled             // cut off by Stop (a reload or shutdown)
	numKinds
)

// CountsSnapshot is Counts at one moment, as /debug/vars shows them.
// Completed probes are Sent - Failed - Canceled, less any in flight.
type CountsSnapshot struct {
	Sent     int64 `json:"sent"`
	Failed   int64 `json:"failed"`
	Skipped  int64 `json:"skipped"`
	Canceled int64 `json:"canceled"`
}

// Snapshot reads the counts.
func (c *Counts) Snapshot() CountsSnapshot {
	return CountsSnapshot{
		Sent:     c.n[sent].Load(),
		Failed:   c.n[failed].Load(),
		Skipped:  c.n[skipped].Load(),
		Canceled: c.n[canceled].Load(),
	}
}

func (t *target) add(k kind) { t.addN(k, 1) }

func (t *target) addN(k kind, n int64) {
	t.counts.n[k].Add(n)
	t.global.n[k].Add(n)
}

// maxCountedNames bounds the process-wide counts: names come from the
// configuration, but every reload may bring new ones.
const maxCountedNames = 256

// overflowName collects the counts of the names past maxCountedNames.
const overflowName = "_other"

// global holds the process's counts by target name. They outlive reloads,
// as the span export counts do, so that a reload does not reset what an
// operator is watching.
var global struct {
	mu     sync.Mutex
	byName map[string]*Counts
}

func globalCounts(name string) *Counts {
	global.mu.Lock()
	defer global.mu.Unlock()
	if global.byName == nil {
		global.byName = map[string]*Counts{}
	}
	if c, ok := global.byName[name]; ok {
		return c
	}
	if len(global.byName) >= maxCountedNames {
		name = overflowName
		if c, ok := global.byName[name]; ok {
			return c
		}
	}
	c := new(Counts)
	global.byName[name] = c
	return c
}

// GlobalCounts returns the process's counts so far, by target name.
func GlobalCounts() map[string]CountsSnapshot {
	global.mu.Lock()
	defer global.mu.Unlock()
	out := make(map[string]CountsSnapshot, len(global.byName))
	for name, c := range global.byName {
		out[name] = c.Snapshot()
	}
	return out
}

func init() {
	// Caddy's admin API serves expvar at /debug/vars. The probes' own
	// measurements are in the spans and metrics (tokentap.probe); these
	// say what the prober did, including the ticks it skipped, which no
	// exchange records.
	expvar.Publish("tokentap_probe", expvar.Func(func() any { return GlobalCounts() }))
}
