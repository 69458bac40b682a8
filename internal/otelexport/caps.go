package otelexport

import (
	"sync"
	"sync/atomic"
)

// Caps on the distinct values that come from traffic rather than from the
// configuration, process wide. A client can put anything in a request's
// model and an upstream anything in its response, and each new value would
// be a new time series in every histogram; past the cap a value is
// reported as OverflowLabelValue ("_other"; error.type: "_OTHER").
const (
	maxMetricModels     = 200
	maxMetricServers    = 100
	maxMetricErrorTypes = 100
)

// The value sets of those attributes share the labels' process-wide table;
// their keys hold dots, which label names cannot, so they never collide.
var (
	requestModels  = ValueSetFor("gen_ai.request.model", maxMetricModels)
	responseModels = ValueSetFor("gen_ai.response.model", maxMetricModels)
	serverAddrs    = ValueSetFor("server.address", maxMetricServers)
	errorTypes     = ValueSetFor("error.type", maxMetricErrorTypes)
	serverPorts    = &portSet{max: maxMetricServers}
)

// OverflowLabelValue replaces a label's (or a capped attribute's) value
// once it has taken its cap of distinct values, so a header that carries a
// request id cannot blow up the metrics' and stats' cardinality.
const OverflowLabelValue = "_other"

// ValueSet remembers the distinct values a label has taken. It is shared by
// every handler in the process and kept across reloads, because the
// cardinality it bounds (metric streams, stats rows) lives that long too.
type ValueSet struct {
	max  int
	seen sync.Map // string -> struct{}
	n    atomic.Int64
}

var (
	ValueSetsMu sync.Mutex
	ValueSets   = map[string]*ValueSet{}
)

// ValueSetFor returns the process-wide value set of a name (a label's, or
// an attribute key's). The first
// configuration to name the label sets its cap; a later, larger cap raises it.
func ValueSetFor(name string, max int) *ValueSet {
	ValueSetsMu.Lock()
	defer ValueSetsMu.Unlock()
	s := ValueSets[name]
	if s == nil {
		s = &ValueSet{max: max}
		ValueSets[name] = s
	} else if max > s.max {
		s.max = max
	}
	return s
}

// Admit returns v if the label may take it, else OverflowLabelValue. Known
// values cost one lock-free map lookup.
func (s *ValueSet) Admit(v string) string {
	if _, ok := s.seen.Load(v); ok {
		return v
	}
	if s.n.Add(1) > int64(s.max) {
		s.n.Add(-1)
		return OverflowLabelValue
	}
	if _, loaded := s.seen.LoadOrStore(v, struct{}{}); loaded {
		s.n.Add(-1)
	}
	return v
}

// portSet caps the distinct upstream ports, like ValueSet caps strings.
// Known ports are read from an immutable map without a lock or an
// allocation (a sync.Map would box each port); a new port copies the map,
// which happens at most max times in the life of the process.
type portSet struct {
	max  int
	mu   sync.Mutex
	seen atomic.Pointer[map[int]struct{}]
}

// admit reports whether port may be a metric attribute: known ports, and
// new ones while the set has room.
func (s *portSet) admit(port int) bool {
	if p := s.seen.Load(); p != nil {
		if _, ok := (*p)[port]; ok {
			return true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.seen.Load()
	if old != nil {
		if _, ok := (*old)[port]; ok {
			return true
		}
		if len(*old) >= s.max {
			return false
		}
	}
	next := make(map[int]struct{}, 1+lenOf(old))
	if old != nil {
		for k := range *old {
			next[k] = struct{}{}
		}
	}
	next[port] = struct{}{}
	s.seen.Store(&next)
	return true
}

func lenOf(m *map[int]struct{}) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
