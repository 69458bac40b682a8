package stats

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"unicode/utf8"
)

// statsColumn is one column of `tokentap stats`.
type statsColumn struct {
	// name is the header, and in lower case the --sort key.
	name string
	// text columns are left-aligned and sort as strings.
	text bool
	// str is a text column's value.
	str func(r *ReportRow) string
	// num is a numeric column's value; ok is false when it has none.
	num func(r *ReportRow) (v float64, ok bool)
	// format renders num's value.
	format func(v float64) string
	// shownIf, when set, shows the column only if some row satisfies it:
	// labels when some row has them, costs when some request had a price.
	shownIf func(r *ReportRow) bool
}

// metricColumn is the column of metric m's quantile q.
func metricColumn(m Metric, q float64) statsColumn {
	name := QuantileName(q)
	format := formatSeconds
	switch m.Unit() {
	case "{token}/s":
		format = func(v float64) string { return fmt.Sprintf("%.1f", v) }
	case "{token}":
		format = func(v float64) string { return fmt.Sprintf("%.0f", v) }
	case "{USD}":
		format = formatUSD
	}
	return statsColumn{
		name: strings.ToUpper(m.Short() + "_" + name),
		num: func(r *ReportRow) (float64, bool) {
			v, ok := r.Metrics.Get(m).Quantiles[name]
			return v, ok
		},
		format: format,
	}
}

func countColumn(name string, f func(r *ReportRow) int64) statsColumn {
	return statsColumn{
		name:   name,
		num:    func(r *ReportRow) (float64, bool) { return float64(f(r)), true },
		format: func(v float64) string { return fmt.Sprintf("%.0f", v) },
	}
}

func rateColumn(name string, f func(r *ReportRow) float64) statsColumn {
	return statsColumn{
		name:   name,
		num:    func(r *ReportRow) (float64, bool) { return f(r), true },
		format: func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) },
	}
}

// labelsText renders a row's labels as name=value pairs, sorted by name.
func labelsText(r *ReportRow) string {
	names := make([]string, 0, len(r.Labels))
	for n := range r.Labels {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		names[i] = n + "=" + r.Labels[n]
	}
	return strings.Join(names, ",")
}

// statsColumns are the table's columns, in order. The LABELS column is
// shown only when some row has labels.
var statsColumns = []statsColumn{
	{name: "PROVIDER", text: true, str: func(r *ReportRow) string { return r.Provider }},
	{name: "MODEL", text: true, str: func(r *ReportRow) string { return r.Model }},
	{name: "LABELS", text: true, str: labelsText, shownIf: func(r *ReportRow) bool { return len(r.Labels) > 0 }},
	{name: "HEALTH", text: true, str: func(r *ReportRow) string {
		if r.Health == nil || r.Health.State == "insufficient_data" {
			return ""
		}
		return r.Health.State
	}},
	countColumn("REQUESTS", func(r *ReportRow) int64 { return r.Requests }),
	rateColumn("ERR%", func(r *ReportRow) float64 { return r.ErrorRate }),
	rateColumn("ABORT%", func(r *ReportRow) float64 { return r.AbortRate }),
	rateColumn("THROTTLED%", func(r *ReportRow) float64 { return r.ThrottledRate }),
	metricColumn(TimeToFirstToken, 0.5),
	metricColumn(TimeToFirstToken, 0.95),
	metricColumn(TimeToFirstVisibleToken, 0.5),
	metricColumn(OutputTokensPerSecond, 0.05),
	metricColumn(OutputTokensPerSecond, 0.5),
	metricColumn(OutputTokensPerSecond, 0.95),
	metricColumn(TimePerOutputToken, 0.5),
	metricColumn(Duration, 0.5),
	metricColumn(Duration, 0.95),
	metricColumn(InputTokens, 0.5),
	metricColumn(OutputTokens, 0.5),
	rateColumn("EST%", func(r *ReportRow) float64 { return r.EstimatedShare }),
	bufferedColumn(),
	costColumn(metricColumn(Cost, 0.5)),
	costColumn(metricColumn(Cost, 0.95)),
	costColumn(statsColumn{
		name: "COST_USD",
		num: func(r *ReportRow) (float64, bool) {
			return r.CostUSD, r.Metrics.Cost.Count > 0
		},
		format: formatUSD,
	}),
	{
		name: "USAGE_RATIO",
		num: func(r *ReportRow) (float64, bool) {
			if r.UsageCheck == nil {
				return 0, false
			}
			return r.UsageCheck.Ratio, true
		},
		format:  func(v float64) string { return fmt.Sprintf("%.3f", v) },
		shownIf: func(r *ReportRow) bool { return r.UsageCheck != nil },
	},
	{
		name: "USAGE_MISMATCH",
		num: func(r *ReportRow) (float64, bool) {
			if r.UsageCheck == nil {
				return 0, false
			}
			return float64(r.UsageCheck.Mismatches), true
		},
		format:  func(v float64) string { return fmt.Sprintf("%d", int64(v)) },
		shownIf: func(r *ReportRow) bool { return r.UsageCheck != nil },
	},
	headroomColumn("RL_REQ%", func(r *RateLimitReport) *RateLimitKind { return r.Requests }),
	headroomColumn("RL_TOK%", func(r *RateLimitReport) *RateLimitKind { return r.Tokens }),
	rateLimitColumn(statsColumn{
		name: "RL_RESET",
		num: func(r *ReportRow) (float64, bool) {
			return resetSeconds(r.RateLimit)
		},
		format: formatSeconds,
	}),
	sloColumn(statsColumn{
		name: "SLO%",
		num: func(r *ReportRow) (float64, bool) {
			if r.SLO == nil {
				return 0, false
			}
			return r.SLO.Attainment, true
		},
		format: func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) },
	}),
	sloColumn(statsColumn{
		name: "GOODPUT",
		num: func(r *ReportRow) (float64, bool) {
			if r.SLO == nil {
				return 0, false
			}
			return r.SLO.TokenGoodput, true
		},
		format: func(v float64) string { return fmt.Sprintf("%.1f", v) },
	}),
}

// bufferedColumn counts the streams that arrived held back and released in
// one burst, shown only when some row has one: most rows never do.
func bufferedColumn() statsColumn {
	c := countColumn("BUFFERED", func(r *ReportRow) int64 { return r.Buffered })
	c.shownIf = func(r *ReportRow) bool { return r.Buffered > 0 }
	return c
}

// rateLimitColumn shows c only when some row's responses reported rate
// limits.
func rateLimitColumn(c statsColumn) statsColumn {
	c.shownIf = func(r *ReportRow) bool { return r.RateLimit != nil }
	return c
}

// headroomColumn is the remaining share of one of a row's limits, its
// latest report.
func headroomColumn(name string, kind func(r *RateLimitReport) *RateLimitKind) statsColumn {
	return rateLimitColumn(statsColumn{
		name: name,
		num: func(r *ReportRow) (float64, bool) {
			if r.RateLimit == nil {
				return 0, false
			}
			k := kind(r.RateLimit)
			if k == nil || k.RemainingShare == nil {
				return 0, false
			}
			return *k.RemainingShare, true
		},
		format: func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) },
	})
}

// resetSeconds is when the tighter of a row's limits is whole again, in
// seconds after its report: the reset of the one with the lower remaining
// share, else the later reset.
func resetSeconds(rl *RateLimitReport) (float64, bool) {
	if rl == nil {
		return 0, false
	}
	var best *RateLimitKind
	for _, k := range []*RateLimitKind{rl.Requests, rl.Tokens} {
		if k == nil || k.ResetSeconds == nil {
			continue
		}
		switch {
		case best == nil:
			best = k
		case k.RemainingShare != nil && best.RemainingShare != nil:
			if *k.RemainingShare < *best.RemainingShare {
				best = k
			}
		case *k.ResetSeconds > *best.ResetSeconds:
			best = k
		}
	}
	if best == nil {
		return 0, false
	}
	return *best.ResetSeconds, true
}

// sloColumn shows c only when an objective judged some request.
func sloColumn(c statsColumn) statsColumn {
	c.shownIf = func(r *ReportRow) bool { return r.SLO != nil }
	return c
}

// costColumn shows c only when some request in the report had a price.
func costColumn(c statsColumn) statsColumn {
	c.shownIf = func(r *ReportRow) bool { return r.Metrics.Cost.Count > 0 }
	return c
}

// extraSortColumns can be sorted by without being shown.
func extraSortColumns() []statsColumn {
	cols := []statsColumn{
		countColumn("ERRORS", func(r *ReportRow) int64 { return r.Errors }),
		countColumn("ABORTS", func(r *ReportRow) int64 { return r.Aborts }),
		countColumn("THROTTLED", func(r *ReportRow) int64 { return r.Throttled }),
	}
	for m := Metric(0); int(m) < NumMetrics; m++ {
		for _, q := range m.Quantiles() {
			cols = append(cols, metricColumn(m, q))
		}
	}
	return cols
}

// TableOrder is a parsed --sort of `tokentap stats`.
type TableOrder struct {
	col  statsColumn
	desc bool
}

// ParseTableSort reads --sort: a column name in any case, with a leading - for
// descending.
func ParseTableSort(s string) (TableOrder, error) {
	var o TableOrder
	name := s
	if strings.HasPrefix(name, "-") {
		o.desc, name = true, name[1:]
	}
	name = strings.ToUpper(name)
	for _, c := range append(append([]statsColumn{}, statsColumns...), extraSortColumns()...) {
		if c.name == name {
			o.col = c
			return o, nil
		}
	}
	return o, fmt.Errorf("--sort %q: use a column name such as ttft_p50, tps_p50, tps_p5, dur_p95, requests, err%% or model, "+
		"or <metric>_p<quantile> with metric one of %s", s, MetricNames())
}

// sortRows orders rows by o, rows without a value last, ties in the
// report's order (provider, model, labels).
func sortRows(rows []ReportRow, o TableOrder) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := &rows[i], &rows[j]
		if o.col.text {
			x, y := o.col.str(a), o.col.str(b)
			if o.desc {
				return x > y
			}
			return x < y
		}
		x, okx := o.col.num(a)
		y, oky := o.col.num(b)
		if okx != oky {
			return okx
		}
		if o.desc {
			return x > y
		}
		return x < y
	})
}

// WriteTable prints the report's rows as aligned columns: text to the
// left, numbers to the right, "-" where a row has no value.
func WriteTable(out io.Writer, rep *Report, o TableOrder) error {
	rows := append([]ReportRow(nil), rep.Rows...)
	sortRows(rows, o)
	var cols []statsColumn
	for _, c := range statsColumns {
		shown := c.shownIf == nil
		for i := 0; i < len(rows) && !shown; i++ {
			shown = c.shownIf(&rows[i])
		}
		if shown {
			cols = append(cols, c)
		}
	}
	cells := make([][]string, len(rows)+1)
	widths := make([]int, len(cols))
	for i, c := range cols {
		cells[0] = append(cells[0], c.name)
		widths[i] = len(c.name)
	}
	for r := range rows {
		for i, c := range cols {
			var s string
			switch {
			case c.text:
				s = c.str(&rows[r])
				if s == "" {
					s = "-"
				}
			default:
				if v, ok := c.num(&rows[r]); ok {
					s = c.format(v)
				} else {
					s = "-"
				}
			}
			cells[r+1] = append(cells[r+1], s)
			widths[i] = max(widths[i], utf8.RuneCountInString(s))
		}
	}
	var b strings.Builder
	for _, line := range cells {
		for i, s := range line {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(s))
			if i > 0 {
				b.WriteString("  ")
			}
			switch {
			case cols[i].text && i == len(line)-1:
				b.WriteString(s)
			case cols[i].text:
				b.WriteString(s + pad)
			default:
				b.WriteString(pad + s)
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// formatUSD renders US dollars with three significant digits past the
// leading zeros, as a per-request cost of a few millionths needs, and cents
// from a dollar up.
func formatUSD(v float64) string {
	if v >= 1 || v <= 0 {
		return fmt.Sprintf("$%.2f", v)
	}
	decimals := min(max(2, 2-int(math.Floor(math.Log10(v)))), 9)
	return fmt.Sprintf("$%.*f", decimals, v)
}

// formatSeconds renders a duration in seconds as a person reads it.
func formatSeconds(v float64) string {
	switch {
	case v < 0.01:
		return fmt.Sprintf("%.1fms", v*1000)
	case v < 1:
		return fmt.Sprintf("%.0fms", v*1000)
	case v < 100:
		return fmt.Sprintf("%.2fs", v)
	default:
		return fmt.Sprintf("%.0fs", math.Round(v))
	}
}

// InflightText writes an in-flight bucket as "1", "2-3" or "64+".
func InflightText(lo, hi int64) string {
	switch {
	case hi == 0:
		return fmt.Sprintf("%d+", lo)
	case hi == lo:
		return fmt.Sprint(lo)
	default:
		return fmt.Sprintf("%d-%d", lo, hi)
	}
}

// WriteInflight prints each row's in-flight buckets under the table: how
// its speed changes as its concurrency rises.
func WriteInflight(out io.Writer, rep *Report, o TableOrder) error {
	rows := append([]ReportRow(nil), rep.Rows...)
	sortRows(rows, o)
	cell := func(s *Summary, m Metric, q string) string {
		v, ok := s.Quantiles[q]
		if !ok {
			return "-"
		}
		if m == OutputTokensPerSecond {
			return fmt.Sprintf("%.1f", v)
		}
		return formatSeconds(v)
	}
	lines := [][]string{{"PROVIDER", "MODEL", "LABELS", "INFLIGHT", "REQUESTS", "TTFT_P50", "TTFT_P95", "TPS_P50", "TPS_P95"}}
	for i := range rows {
		r := &rows[i]
		for j := range r.ByInflight {
			p := &r.ByInflight[j]
			lines = append(lines, []string{r.Provider, r.Model, orDash(labelsText(r)), InflightText(p.InflightMin, p.InflightMax), fmt.Sprint(p.Requests),
				cell(&p.Metrics.TimeToFirstToken, TimeToFirstToken, "p50"), cell(&p.Metrics.TimeToFirstToken, TimeToFirstToken, "p95"),
				cell(&p.Metrics.OutputTokensPerSecond, OutputTokensPerSecond, "p50"), cell(&p.Metrics.OutputTokensPerSecond, OutputTokensPerSecond, "p95")})
		}
	}
	return writeAligned(out, lines, 4)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeAligned prints lines as columns, the first textCols left-aligned
// and the rest right-aligned.
func writeAligned(out io.Writer, lines [][]string, textCols int) error {
	widths := make([]int, len(lines[0]))
	for _, line := range lines {
		for i, c := range line {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, line := range lines {
		for i, c := range line {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if i < textCols {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(out, strings.TrimRight(b.String(), " \n")+"\n")
	return err
}

// WriteSeries prints each row's series under the table: one line per time
// slice, oldest first, with the slice's requests, errors and the
// quantiles that show a model speeding up or slowing down.
func WriteSeries(out io.Writer, rep *Report, o TableOrder) error {
	rows := append([]ReportRow(nil), rep.Rows...)
	sortRows(rows, o)
	metricCell := func(p *SeriesPoint, m Metric, q string) string {
		v, ok := p.Metrics.Get(m).Quantiles[q]
		if !ok {
			return "-"
		}
		if m.Unit() == "{token}/s" {
			return fmt.Sprintf("%.1f", v)
		}
		return formatSeconds(v)
	}
	cells := [][]string{{"PROVIDER", "MODEL", "LABELS", "START", "REQUESTS", "ERRORS", "TTFT_P50", "TTFT_P95", "TPS_P50", "TPS_P95"}}
	for i := range rows {
		r := &rows[i]
		for j := range r.Series {
			p := &r.Series[j]
			cells = append(cells, []string{r.Provider, r.Model, orDash(labelsText(r)), p.Start.UTC().Format("2006-01-02T15:04:05Z"),
				fmt.Sprint(p.Requests), fmt.Sprint(p.Errors),
				metricCell(p, TimeToFirstToken, "p50"), metricCell(p, TimeToFirstToken, "p95"),
				metricCell(p, OutputTokensPerSecond, "p50"), metricCell(p, OutputTokensPerSecond, "p95")})
		}
	}
	return writeAligned(out, cells, 4)
}
