package loadreport

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/tokentap/tokentap/internal/loadgen"
)

// Comparison is runs side by side, model by model: each run's figures and
// their change against the first run's, which is the baseline.
type Comparison struct {
	// Runs are the runs' names, the baseline first.
	Runs []string `json:"runs"`
	// Sweep is the parameter the runs swept, when they are sweeps: rows
	// are then matched level by level.
	Sweep  string            `json:"sweep,omitempty"`
	Models []ModelComparison `json:"models"`
}

// ModelComparison is one model's rows: per level of a sweep (in the
// baseline's order, then the other runs' new levels), each run in turn.
type ModelComparison struct {
	// Model is the model's name; "all" is every model together, given
	// when a run has several.
	Model string `json:"model"`
	Rows  []Row  `json:"rows"`
}

// Row is one run's figures for one model (at one level).
type Row struct {
	Run string `json:"run"`
	// Level is the sweep's value (clients or requests/s); absent for runs
	// that are not sweeps.
	Level float64 `json:"level,omitempty"`
	// Succeeded and Failed are the requests that completed and failed.
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	// The medians and 95th percentiles of time to first token (seconds)
	// and output tokens/s per request, as in loadgen.ModelReport; absent
	// without a sample.
	TTFTP50 *float64 `json:"ttft_p50_seconds,omitempty"`
	TTFTP95 *float64 `json:"ttft_p95_seconds,omitempty"`
	TPSP50  *float64 `json:"tps_p50,omitempty"`
	TPSP95  *float64 `json:"tps_p95,omitempty"`
	// Throughput is every output token over the run's time, tokens/s.
	Throughput float64 `json:"throughput_tokens_per_second"`
	// Change is each figure's relative change against the baseline's row
	// of the same model and level ((this - baseline) / baseline, so 0.1
	// is 10 % more); absent on the baseline's own rows and where the
	// baseline has no such row.
	Change *Change `json:"change,omitempty"`
}

// Change is a row's figures relative to the baseline's: a figure is
// absent where either side has none or the baseline's is zero. For time
// to first token lower is better, for tokens/s higher.
type Change struct {
	TTFTP50    *float64 `json:"ttft_p50,omitempty"`
	TTFTP95    *float64 `json:"ttft_p95,omitempty"`
	TPSP50     *float64 `json:"tps_p50,omitempty"`
	TPSP95     *float64 `json:"tps_p95,omitempty"`
	Throughput *float64 `json:"throughput,omitempty"`
}

// Compare sets runs side by side against the first. The runs must all be
// single runs, or all sweeps over the same parameter: a single run and a
// level of a sweep were run differently, and two sweeps over different
// parameters have no levels in common.
func Compare(runs []Run) (*Comparison, error) {
	if err := check(runs); err != nil {
		return nil, err
	}
	if len(runs) < 2 {
		return nil, fmt.Errorf("comparing needs two runs or more, got %d", len(runs))
	}
	c := &Comparison{}
	if runs[0].Sweep != nil {
		c.Sweep = runs[0].Sweep.Sweep
	}
	for _, r := range runs {
		c.Runs = append(c.Runs, r.Name)
		switch {
		case c.Sweep == "" && r.Sweep != nil:
			return nil, fmt.Errorf("%s is a sweep and %s a single run: compare sweeps with sweeps, single runs with single runs", r.Name, runs[0].Name)
		case c.Sweep != "" && r.Sweep == nil:
			return nil, fmt.Errorf("%s is a single run and %s a sweep: compare sweeps with sweeps, single runs with single runs", r.Name, runs[0].Name)
		case r.Sweep != nil && r.Sweep.Sweep != c.Sweep:
			return nil, fmt.Errorf("%s sweeps %s and %s sweeps %s: their levels do not compare", r.Name, r.Sweep.Sweep, runs[0].Name, c.Sweep)
		}
	}

	// Models and levels in the order met, the baseline's first.
	var models []string
	var values []float64
	multi := false
	for _, r := range runs {
		for _, l := range r.levels() {
			multi = multi || len(l.rep.Models) > 1
			if !slices.Contains(values, l.value) {
				values = append(values, l.value)
			}
			for _, m := range l.rep.Models {
				if !slices.Contains(models, m.Model) {
					models = append(models, m.Model)
				}
			}
		}
	}
	if multi {
		models = append(models, "all")
	}
	for _, m := range models {
		mc := ModelComparison{Model: m}
		for _, v := range values {
			var base *Row
			for i, r := range runs {
				mr, ok := find(r, m, v)
				if !ok {
					continue
				}
				row := newRow(r.Name, mr)
				if c.Sweep != "" {
					row.Level = v
				}
				switch {
				case i == 0:
					base = &row
				case base != nil:
					row.Change = change(base, &row)
				}
				mc.Rows = append(mc.Rows, row)
			}
		}
		c.Models = append(c.Models, mc)
	}
	return c, nil
}

// find is r's report of model m ("all": the total) at level v.
func find(r Run, m string, v float64) (*loadgen.ModelReport, bool) {
	for _, l := range r.levels() {
		if l.value != v {
			continue
		}
		if m == "all" && len(l.rep.Models) > 1 {
			return &l.rep.Total, true
		}
		if mr := model(l.rep, m); mr != nil {
			return mr, true
		}
	}
	return nil, false
}

func newRow(run string, m *loadgen.ModelReport) Row {
	return Row{
		Run: run, Succeeded: m.Succeeded, Failed: m.Failed, Throughput: m.Throughput,
		TTFTP50: quantile(m.TimeToFirstToken, m.TimeToFirstToken.P50),
		TTFTP95: quantile(m.TimeToFirstToken, m.TimeToFirstToken.P95),
		TPSP50:  quantile(m.OutputTokensPerSecond, m.OutputTokensPerSecond.P50),
		TPSP95:  quantile(m.OutputTokensPerSecond, m.OutputTokensPerSecond.P95),
	}
}

// quantile is v, or nil when q had no sample.
func quantile(q loadgen.Quantiles, v float64) *float64 {
	if q.Count == 0 {
		return nil
	}
	return &v
}

func change(base, row *Row) *Change {
	rel := func(b, v *float64) *float64 {
		if b == nil || v == nil || *b == 0 {
			return nil
		}
		r := (*v - *b) / *b
		return &r
	}
	tb, tr := base.Throughput, row.Throughput
	return &Change{
		TTFTP50: rel(base.TTFTP50, row.TTFTP50), TTFTP95: rel(base.TTFTP95, row.TTFTP95),
		TPSP50: rel(base.TPSP50, row.TPSP50), TPSP95: rel(base.TPSP95, row.TPSP95),
		Throughput: rel(&tb, &tr),
	}
}

// WriteTable writes the comparison for a terminal: per model, a row per
// run (and level), durations in milliseconds, and the change against the
// baseline in per cent.
func (c *Comparison) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d runs against the first, %s: TTFT lower is better, tok/s higher is better\n", len(c.Runs), c.Runs[0])
	for _, m := range c.Models {
		fmt.Fprintf(&b, "\n%s\n", m.Model)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := "run\t"
		if c.Sweep != "" {
			head += c.Sweep + "\t"
		}
		fmt.Fprintln(tw, head+"ok\tfailed\tTTFT ms p50\tp95\ttok/s p50\tp95\ttok/s total\tΔ TTFT p50\tp95\tΔ tok/s p50\tp95\tΔ total\t")
		for _, r := range m.Rows {
			fmt.Fprintf(tw, "%s\t", r.Run)
			if c.Sweep != "" {
				fmt.Fprintf(tw, "%s\t", formatFloat(r.Level))
			}
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%.1f\t", r.Succeeded, r.Failed,
				scaled(r.TTFTP50, 1e3), scaled(r.TTFTP95, 1e3), scaled(r.TPSP50, 1), scaled(r.TPSP95, 1), r.Throughput)
			if ch := r.Change; ch != nil {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t", percent(ch.TTFTP50), percent(ch.TTFTP95), percent(ch.TPSP50), percent(ch.TPSP95), percent(ch.Throughput))
			} else {
				fmt.Fprint(tw, "\t\t\t\t\t")
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// scaled is *v·k to one decimal, or "-" without a value.
func scaled(v *float64, k float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", *v*k)
}

// percent is a relative change as a signed percentage, or "-".
func percent(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", *v*100)
}
