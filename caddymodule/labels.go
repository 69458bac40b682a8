package caddymodule

import (
	"fmt"
	"regexp"
	"sort"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/sink"
)

// DefaultMaxLabelValues caps the distinct values one label takes, process
// wide, when max_label_values is not set.
const DefaultMaxLabelValues = 100

// OverflowLabelValue replaces a label's value once the label has taken
// max_label_values distinct values, so a header that carries a request id
// cannot blow up the metrics' and stats' cardinality.
const OverflowLabelValue = otelexport.OverflowLabelValue

var labelNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// labelDef is one configured label, ready to resolve.
type labelDef struct {
	name     string
	template string
	values   *otelexport.ValueSet
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
			values:   otelexport.ValueSetFor(name, max),
		}
	}
	return nil
}

// resolveLabels evaluates the labels' placeholders for one request, at its
// end, so response placeholders work too.
func (x *exchange) resolveLabels() []sink.Label {
	defs := x.h.labels
	if len(defs) == 0 {
		return nil
	}
	repl, _ := x.r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	out := make([]sink.Label, len(defs))
	for i := range defs {
		v := defs[i].template
		if repl != nil {
			v = repl.ReplaceAll(v, "")
		}
		out[i] = sink.Label{Name: defs[i].name, Value: defs[i].values.Admit(v)}
	}
	return out
}
