package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/tokentap/tokentap/internal/loadgen"
)

// A series is --runs whole runs in turn. Between runs the machine's level
// moves more than two builds differ (docs/BENCHMARKS.md, "Two builds in
// one run"), so a claim about a build rests on several runs: with
// --compare the two builds change paths every run, so that neither keeps
// a path the order of the cells might favour, and each run gives one
// difference of the two builds measured under the same conditions.
type series struct {
	Runs    []seriesRun   `json:"runs"`
	Summary []seriesLevel `json:"summary"`
}

// seriesRun is one run: which build was on the tokentap path and which on
// the fourth (empty for the A/A control), and its report.
type seriesRun struct {
	Tokentap string  `json:"tokentap_binary"`
	Fourth   string  `json:"fourth_binary,omitempty"`
	Report   *report `json:"report"`
}

// seriesLevel summarises one concurrency over the runs: each build's (or,
// without --compare, tokentap's and the A/A control's) CPU per event and
// added p99 in every run, with their means, and with --compare the paired
// difference of the first build less the second.
type seriesLevel struct {
	Concurrency int         `json:"concurrency"`
	Rows        []seriesRow `json:"rows"`
	Difference  *seriesRow  `json:"difference,omitempty"`
	// CPUCrossover and P99Crossover split Difference into the builds'
	// share and the paths' (crossover.go); absent without --compare or
	// when the runs do not put each build on each path.
	CPUCrossover *crossover `json:"cpu_vs_caddy_crossover,omitempty"`
	P99Crossover *crossover `json:"added_p99_us_crossover,omitempty"`
}

// seriesRow is one build's (or path's) figures, one value per run, in run
// order, and their Student-t 95 % intervals.
type seriesRow struct {
	Name           string               `json:"name"`
	CPUVsCaddy     []float64            `json:"cpu_vs_caddy"`
	CPUVsCaddyMean loadgen.MeanInterval `json:"cpu_vs_caddy_mean"`
	AddedP99us     []float64            `json:"added_p99_us"`
	AddedP99Mean   loadgen.MeanInterval `json:"added_p99_us_mean"`
}

// runSeries runs the benchmark o.runs times, run i with the two builds
// swapped when i is odd, and summarises the runs. The runs that completed
// are summarised also when a later one fails.
func runSeries(ctx context.Context, o options, log io.Writer, out io.Writer) (*series, error) {
	s := &series{}
	for i := range o.runs {
		oi := o
		if o.compare != "" && i%2 == 1 {
			oi.binary, oi.compare = o.compare, o.binary
		}
		if o.workDir != "" {
			// Each run's configs and logs of their own.
			oi.workDir = filepath.Join(o.workDir, fmt.Sprintf("run-%d", i+1))
		}
		fmt.Fprintf(log, "run %d of %d: %s on the tokentap path\n", i+1, o.runs, oi.binary)
		rep, err := run(ctx, oi, log)
		if rep != nil {
			fmt.Fprintf(out, "# Run %d of %d\n\n", i+1, o.runs)
			rep.writeMarkdown(out)
			s.Runs = append(s.Runs, seriesRun{Tokentap: oi.binary, Fourth: oi.compare, Report: rep})
		}
		if err != nil {
			s.summarise(o)
			return s, fmt.Errorf("run %d: %w", i+1, err)
		}
	}
	s.summarise(o)
	return s, nil
}

// summarise builds Summary from Runs. The first build is o.binary, the
// second o.compare; without --compare the rows are the tokentap path and
// the A/A control.
func (s *series) summarise(o options) {
	s.Summary = nil
	first, second := "tokentap", pathNames[pathControl]
	if o.compare != "" {
		first, second = "--binary "+o.binary, "--compare "+o.compare
	}
	for _, lv := range o.levels {
		sl := seriesLevel{Concurrency: lv.Concurrency}
		rows := [2]seriesRow{{Name: first}, {Name: second}}
		diff := seriesRow{Name: "difference, first less second"}
		var onTap []bool
		for _, r := range s.Runs {
			lr := r.Report.level(lv.Concurrency)
			if lr == nil || len(lr.Paths) != numPaths {
				continue
			}
			tt, fourth := lr.Paths[pathTokentap], lr.Paths[pathControl]
			if tt.CPUVsCaddy == nil || fourth.CPUVsCaddy == nil || tt.AddedP99us == nil || fourth.AddedP99us == nil {
				continue
			}
			a, b := tt, fourth
			if o.compare != "" && r.Tokentap != o.binary {
				a, b = fourth, tt
			}
			rows[0].add(*a.CPUVsCaddy, *a.AddedP99us)
			rows[1].add(*b.CPUVsCaddy, *b.AddedP99us)
			diff.add(*a.CPUVsCaddy-*b.CPUVsCaddy, *a.AddedP99us-*b.AddedP99us)
			onTap = append(onTap, r.Tokentap == o.binary)
		}
		for i := range rows {
			rows[i].close()
		}
		sl.Rows = rows[:]
		if o.compare != "" {
			diff.close()
			sl.Difference = &diff
			if c, ok := newCrossover(diff.CPUVsCaddy, onTap); ok {
				sl.CPUCrossover = &c
			}
			if c, ok := newCrossover(diff.AddedP99us, onTap); ok {
				sl.P99Crossover = &c
			}
		}
		s.Summary = append(s.Summary, sl)
	}
}

func (r *seriesRow) add(cpu, p99 float64) {
	r.CPUVsCaddy = append(r.CPUVsCaddy, cpu)
	r.AddedP99us = append(r.AddedP99us, p99)
}

func (r *seriesRow) close() {
	r.CPUVsCaddyMean = loadgen.NewMeanInterval(r.CPUVsCaddy)
	r.AddedP99Mean = loadgen.NewMeanInterval(r.AddedP99us)
}

// level returns the report's figures at concurrency c, or nil.
func (rep *report) level(c int) *levelReport {
	for i := range rep.Levels {
		if rep.Levels[i].Concurrency == c {
			return &rep.Levels[i]
		}
	}
	return nil
}

// writeMarkdown writes the summary table: per level, each row's value in
// every run, then its mean and 95 % interval.
func (s *series) writeMarkdown(w io.Writer) {
	var b strings.Builder
	fmt.Fprintf(&b, "# Summary of %d runs\n\n", len(s.Runs))
	for _, sl := range s.Summary {
		fmt.Fprintf(&b, "## Concurrency %d\n\n", sl.Concurrency)
		b.WriteString("| | CPU vs Caddy, each run | mean (95 % interval) | added p99 µs, each run | mean (95 % interval) |\n")
		b.WriteString("| --- | --- | --- | --- | --- |\n")
		rows := sl.Rows
		if sl.Difference != nil {
			rows = append(rows[:len(rows):len(rows)], *sl.Difference)
		}
		for i, r := range rows {
			cpuFmt, p99Fmt := "%.3f", "%.0f"
			if sl.Difference != nil && i == len(rows)-1 {
				cpuFmt, p99Fmt = "%+.3f", "%+.0f"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.Name,
				joinValues(r.CPUVsCaddy, cpuFmt), interval(r.CPUVsCaddyMean, cpuFmt),
				joinValues(r.AddedP99us, p99Fmt), interval(r.AddedP99Mean, p99Fmt))
		}
		b.WriteString("\n")
		if c, p := sl.CPUCrossover, sl.P99Crossover; c != nil && p != nil {
			fmt.Fprintf(&b, "Split by which path the first build took (crossover, %d degrees of freedom): "+
				"the builds differ by %s × Caddy's CPU and %s µs of added p99; "+
				"the tokentap path less the fourth, for the same build, %s × and %s µs.\n\n",
				c.DF, c.Build.format("%+.3f"), p.Build.format("%+.0f"), c.Paths.format("%+.3f"), p.Paths.format("%+.0f"))
		}
	}
	_, _ = io.WriteString(w, b.String())
}

func joinValues(v []float64, format string) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, ", ")
}

// interval writes a mean with its interval, or the mean alone when fewer
// than two values give no interval.
func interval(iv loadgen.MeanInterval, format string) string {
	if iv.N == 0 {
		return "–"
	}
	if iv.CILow == nil || iv.CIHigh == nil {
		return fmt.Sprintf(format, iv.Mean)
	}
	return estimate{Value: iv.Mean, Low: *iv.CILow, High: *iv.CIHigh}.format(format)
}

// format writes the estimate with its interval.
func (e estimate) format(f string) string {
	return fmt.Sprintf(f+" ("+f+" to "+f+")", e.Value, e.Low, e.High)
}
