package caddymodule

import (
	"fmt"
	"regexp"
	"sort"

	"github.com/tokentap/tokentap/internal/exchange"
	"github.com/tokentap/tokentap/internal/otelexport"
)

// DefaultMaxLabelValues caps the distinct values one label takes, process
// wide, when max_label_values is not set.
const DefaultMaxLabelValues = 100

// OverflowLabelValue replaces a label's value once the label has taken
// max_label_values distinct values, so a header that carries a request id
// cannot blow up the metrics' and stats' cardinality.
const OverflowLabelValue = otelexport.OverflowLabelValue

var labelNameRE = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

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
	h.cfg.Labels = make([]exchange.Label, len(names))
	for i, name := range names {
		h.cfg.Labels[i] = exchange.Label{
			Name:     name,
			Template: h.Labels[name],
			Values:   otelexport.ValueSetFor(name, max),
		}
	}
	return nil
}
