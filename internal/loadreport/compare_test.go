package loadreport

import (
	"math"
	"strings"
	"testing"

	"github.com/tokentap/tokentap/internal/loadgen"
)

func TestCompare(t *testing.T) {
	slower := speed{model: "fast", ttft: 0.12, tps: 100} // fast, 20 % later and 1/6 slower
	for _, tc := range []struct {
		name    string
		runs    []Run
		wantErr string
		// rows are the rows wanted per model: run, level.
		rows map[string][]string
		// change is the baseline-relative TTFT p50 change of a model's
		// second row.
		change map[string]float64
		// table holds lines the table must have, each as fields.
		table [][]string
	}{
		{
			name:   "two single runs",
			runs:   []Run{{Name: "a.json", Report: fakeReport(t0, 4, fast, slow)}, {Name: "b.json", Report: fakeReport(t0, 4, slower, slow)}},
			rows:   map[string][]string{"fast": {"a.json", "b.json"}, "slow": {"a.json", "b.json"}, "all": {"a.json", "b.json"}},
			change: map[string]float64{"fast": 0.2, "slow": 0},
			table: [][]string{
				{"fast"},
				{"run", "ok", "failed", "TTFT", "ms", "p50", "p95", "tok/s", "p50", "p95", "tok/s", "total", "Δ", "TTFT", "p50", "p95", "Δ", "tok/s", "p50", "p95", "Δ", "total"},
				{"a.json", "39", "1", "130.0", "314.5", "92.3", "123.9", "390.0"},
				{"b.json", "39", "1", "156.0", "377.4", "76.9", "103.3", "390.0", "+20.0%", "+20.0%", "-16.7%", "-16.7%", "+0.0%"},
			},
		},
		{
			name: "a model only the later run has: no change",
			runs: []Run{{Name: "a", Report: fakeReport(t0, 4, slow)}, {Name: "b", Report: fakeReport(t0, 4, slow, fast)}},
			rows: map[string][]string{"slow": {"a", "b"}, "fast": {"b"}, "all": {"b"}},
			table: [][]string{
				{"b", "39", "1", "130.0", "314.5", "92.3", "123.9", "390.0"},
			},
		},
		{
			name: "sweeps, level by level",
			runs: []Run{{Name: "a", Sweep: fakeSweep([]int{1, 4}, fast)}, {Name: "b", Sweep: fakeSweep([]int{4, 8}, slower)}},
			rows: map[string][]string{"fast": {"a@1", "a@4", "b@4", "b@8"}},
			table: [][]string{
				{"run", "concurrency", "ok", "failed", "TTFT", "ms", "p50", "p95", "tok/s", "p50", "p95", "tok/s", "total", "Δ", "TTFT", "p50", "p95", "Δ", "tok/s", "p50", "p95", "Δ", "total"},
				{"b", "4", "39", "1", "156.0", "377.4", "76.9", "103.3", "390.0", "+20.0%", "+20.0%", "-16.7%", "-16.7%", "+0.0%"},
				{"b", "8", "39", "1", "174.0", "420.9", "69.0", "92.6", "390.0"},
			},
		},
		{name: "one run", runs: []Run{{Name: "a", Report: fakeReport(t0, 1, fast)}}, wantErr: "two runs or more"},
		{name: "a single run and a sweep", runs: []Run{{Name: "a", Report: fakeReport(t0, 1, fast)}, {Name: "b", Sweep: fakeSweep([]int{1}, fast)}}, wantErr: "b is a sweep and a a single run"},
		{
			name:    "sweeps over different parameters",
			runs:    []Run{{Name: "a", Sweep: fakeSweep([]int{1}, fast)}, {Name: "b", Sweep: &loadgen.SweepReport{Sweep: "rate", Levels: []*loadgen.Report{fakeReport(t0, 1, fast)}}}},
			wantErr: "b sweeps rate and a sweeps concurrency",
		},
		{name: "two runs of one name", runs: []Run{{Name: "a", Report: fakeReport(t0, 1, fast)}, {Name: "a", Report: fakeReport(t0, 1, fast)}}, wantErr: `two runs are named "a"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Compare(tc.runs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]string{}
			for _, m := range c.Models {
				for _, r := range m.Rows {
					name := r.Run
					if c.Sweep != "" {
						name += "@" + formatFloat(r.Level)
					}
					got[m.Model] = append(got[m.Model], name)
				}
			}
			if len(got) != len(tc.rows) {
				t.Errorf("models %v, want %v", got, tc.rows)
			}
			for m, want := range tc.rows {
				if strings.Join(got[m], " ") != strings.Join(want, " ") {
					t.Errorf("%s: rows %v, want %v", m, got[m], want)
				}
			}
			for _, m := range c.Models {
				want, ok := tc.change[m.Model]
				if !ok {
					continue
				}
				if m.Rows[0].Change != nil {
					t.Errorf("%s: the baseline has a change", m.Model)
				}
				ch := m.Rows[1].Change
				if ch == nil || ch.TTFTP50 == nil || math.Abs(*ch.TTFTP50-want) > 1e-9 {
					t.Errorf("%s: change %+v, want TTFT p50 %+v", m.Model, ch, want)
				}
			}
			var b strings.Builder
			if err := c.WriteTable(&b); err != nil {
				t.Fatal(err)
			}
			lines := map[string]bool{}
			for _, l := range strings.Split(b.String(), "\n") {
				lines[strings.Join(strings.Fields(l), " ")] = true
			}
			for _, want := range tc.table {
				if !lines[strings.Join(want, " ")] {
					t.Errorf("the table lacks the line %q:\n%s", strings.Join(want, " "), b.String())
				}
			}
		})
	}
}
