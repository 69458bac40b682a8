package caddymodule

import (
	"fmt"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"go.opentelemetry.io/otel/attribute"
)

// DefaultMaxLabelValues caps the distinct values one label takes, process
// wide, when max_label_values is not set.
const DefaultMaxLabelValues = 100

// OverflowLabelValue replaces a label's value once the label has taken
// max_label_values distinct values, so a header that carries a request id
// cannot blow up the metrics' and stats' cardinality.
const OverflowLabelValue = "_other"

// labelAttrPrefix prefixes a label's name on spans and metric points.
const labelAttrPrefix = "tokentap.label."

var labelNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// labelValue is one label resolved for one request.
type labelValue struct {
	name  string
	attr  attribute.Key
	value string
}

// labelDef is one configured label, ready to resolve.
type labelDef struct {
	name     string
	template string
	attr     attribute.Key
	values   *valueSet
}

// valueSet remembers the distinct values a label has taken. It is shared by
// every handler in the process and kept across reloads, because the
// cardinality it bounds (metric streams, stats rows) lives that long too.
type valueSet struct {
	max  int
	seen sync.Map // string -> struct{}
	n    atomic.Int64
}

var (
	valueSetsMu sync.Mutex
	valueSets   = map[string]*valueSet{}
)

// valueSetFor returns the process-wide value set of a label name. The first
// configuration to name the label sets its cap; a later, larger cap raises it.
func valueSetFor(name string, max int) *valueSet {
	valueSetsMu.Lock()
	defer valueSetsMu.Unlock()
	s := valueSets[name]
	if s == nil {
		s = &valueSet{max: max}
		valueSets[name] = s
	} else if max > s.max {
		s.max = max
	}
	return s
}

// admit returns v if the label may take it, else OverflowLabelValue. Known
// values cost one lock-free map lookup.
func (s *valueSet) admit(v string) string {
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

// provisionLabels checks and sorts the configured labels.
func (h *Handler) provisionLabels() error {
	max := h.MaxLabelValues
	if max == 0 {
		max = DefaultMaxLabelValues
	}
	names := make([]string, 0, len(h.Labels))
	for name := range h.Labels {
		if !labelNameRE.MatchString(name) {
			return fmt.Errorf("label name %q: use lower-case letters, digits and _, starting with a letter", name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	h.labels = make([]labelDef, len(names))
	for i, name := range names {
		h.labels[i] = labelDef{
			name:     name,
			template: h.Labels[name],
			attr:     attribute.Key(labelAttrPrefix + name),
			values:   valueSetFor(name, max),
		}
	}
	return nil
}

// resolveLabels evaluates the labels' placeholders for one request, at its
// end, so response placeholders work too.
func (x *exchange) resolveLabels() []labelValue {
	defs := x.h.labels
	if len(defs) == 0 {
		return nil
	}
	repl, _ := x.r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	out := make([]labelValue, len(defs))
	for i := range defs {
		v := defs[i].template
		if repl != nil {
			v = repl.ReplaceAll(v, "")
		}
		out[i] = labelValue{name: defs[i].name, attr: defs[i].attr, value: defs[i].values.admit(v)}
	}
	return out
}
