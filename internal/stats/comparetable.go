package stats

import (
	"fmt"
	"io"
	"strings"
)

// WriteComparison prints a comparison as `tokentap stats --compare` does:
// the sides, then per metric and quantile the fair ratio with its
// interval, the naive one and the shares compared; with cells, the
// per-cell table under it.
func WriteComparison(out io.Writer, c *Comparison, cells bool) error {
	var b strings.Builder
	for _, s := range []struct {
		name string
		side *CompareSide
	}{{"A", &c.A}, {"B", &c.B}} {
		fmt.Fprintf(&b, "%s: %s (%d rows, %d requests, %d with a known in-flight level and input size)\n",
			s.name, s.side.Selector, len(s.side.Rows), s.side.Requests, s.side.Stratified)
	}
	fmt.Fprintf(&b, "\nB/A over the last %s, within cells of in-flight level x input size (95 %% interval); naive: the whole rows side by side\n", c.Window)
	if _, err := io.WriteString(out, b.String()); err != nil {
		return err
	}
	lines := [][]string{{"METRIC", "Q", "FAIR", "95% INTERVAL", "NAIVE", "CELLS", "A_SHARED", "B_SHARED"}}
	for _, m := range c.Metrics {
		naive := "-"
		if m.Naive != nil {
			naive = fmt.Sprintf("%.2f", *m.Naive)
		}
		short := metricShort(m.Metric)
		if m.Fair == nil {
			lines = append(lines, []string{short, m.Quantile, "not comparable: " + m.NotComparable, "", naive, "0", "-", "-"})
			continue
		}
		lines = append(lines, []string{short, m.Quantile, fmt.Sprintf("%.2f", m.Fair.Ratio), fmt.Sprintf("%.2f-%.2f", m.Fair.Low, m.Fair.High),
			naive, fmt.Sprint(m.Cells), fmt.Sprintf("%.0f%%", 100*m.CoverageA), fmt.Sprintf("%.0f%%", 100*m.CoverageB)})
	}
	if err := writeAligned(out, lines, 3); err != nil {
		return err
	}
	if !cells {
		return nil
	}
	if _, err := io.WriteString(out, "\nBy cell (ratio B/A where both sides have enough requests):\n"); err != nil {
		return err
	}
	header := []string{"INFLIGHT", "INPUT", "A_REQ", "B_REQ"}
	for _, m := range c.Metrics {
		header = append(header, strings.ToUpper(metricShort(m.Metric)+"_"+m.Quantile))
	}
	lines = [][]string{header}
	for _, cell := range c.Cells {
		line := []string{InflightText(cell.InflightMin, cell.InflightMax), InputText(cell.InputMin, cell.InputMax), fmt.Sprint(cell.RequestsA), fmt.Sprint(cell.RequestsB)}
		for _, cm := range cell.Metrics {
			if cm.Ratio == nil {
				line = append(line, "-")
				continue
			}
			line = append(line, fmt.Sprintf("%.2f (%.2f-%.2f)", cm.Ratio.Ratio, cm.Ratio.Low, cm.Ratio.High))
		}
		lines = append(lines, line)
	}
	return writeAligned(out, lines, 2)
}

// metricShort is the short name of the metric named name.
func metricShort(name string) string {
	if m, ok := LookupMetric(name); ok {
		return m.Short()
	}
	return name
}

// InputText writes an input bucket as "<512", "512-1023" or "32k+".
func InputText(lo, hi int64) string {
	k := func(v int64) string {
		if v >= 1024 && v%1024 == 0 {
			return fmt.Sprintf("%dk", v/1024)
		}
		return fmt.Sprint(v)
	}
	switch {
	case lo == 0:
		return "<" + k(hi+1)
	case hi == 0:
		return k(lo) + "+"
	default:
		return k(lo) + "-" + k(hi+1)
	}
}
