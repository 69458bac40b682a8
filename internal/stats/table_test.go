package stats

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWriteTableCost: the cost columns (p50, p95 and the window's total)
// appear only when some request had a price, and a row without one shows
// "-" rather than a cost of zero.
func TestWriteTableCost(t *testing.T) {
	priced := func(usd float64) Sample {
		s := only(OutputTokensPerSecond, 50)
		s.Set(Cost, usd)
		return s
	}
	tests := []struct {
		name string
		// record fills the store; rows are read from the 5m window.
		record func(s *Store)
		// want maps a model to its COST_P50, COST_P95 and COST_USD cells:
		// the quantiles as the value they must be within the sketches'
		// accuracy of, the total (an exact sum) as printed; nil when the
		// columns must be absent.
		want map[string][3]string
	}{
		{
			name: "no price anywhere: no cost columns",
			record: func(s *Store) {
				record(s, key("openai", "gpt-a"), only(OutputTokensPerSecond, 50), time.Second)
			},
		},
		{
			name: "one model priced, one not",
			record: func(s *Store) {
				for i := range 20 {
					// 17 requests at $0.000125 and three at $0.0125: the
					// p95 (rank 18.05 of 0..19) is $0.0125.
					usd := 0.000125
					if i >= 17 {
						usd = 0.0125
					}
					record(s, key("openai", "gpt-a"), priced(usd), time.Second)
				}
				record(s, key("openai", "gpt-unpriced"), only(OutputTokensPerSecond, 50), time.Second)
			},
			want: map[string][3]string{
				"gpt-a":        {"0.000125", "0.0125", "$0.0396"},
				"gpt-unpriced": {"-", "-", "-"},
			},
		},
		{
			name: "dollars and up",
			record: func(s *Store) {
				record(s, key("anthropic", "claude-x"), priced(2.5), time.Second)
				record(s, key("anthropic", "claude-x"), priced(2.5), time.Second)
			},
			want: map[string][3]string{"claude-x": {"2.5", "2.5", "$5.00"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(0)
			tt.record(s)
			now := at(2 * time.Second)
			o, err := ParseTableSort("model")
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			if err := WriteTable(&b, s.Aggregate(Window5m, now).Report(now), o); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(b.String()), "\n")
			header := strings.Fields(lines[0])
			col := map[string]int{}
			for i, h := range header {
				col[h] = i
			}
			if tt.want == nil {
				for _, h := range []string{"COST_P50", "COST_P95", "COST_USD"} {
					if _, ok := col[h]; ok {
						t.Errorf("column %s shown without a price:\n%s", h, b.String())
					}
				}
				return
			}
			for _, line := range lines[1:] {
				f := strings.Fields(line)
				want, ok := tt.want[f[col["MODEL"]]]
				if !ok {
					t.Errorf("unexpected row %q", line)
					continue
				}
				got := [3]string{f[col["COST_P50"]], f[col["COST_P95"]], f[col["COST_USD"]]}
				for i := range 2 {
					if !near(got[i], want[i]) {
						t.Errorf("%s: cost quantile cell %q, want $%s within %g", f[col["MODEL"]], got[i], want[i], RelativeAccuracy)
					}
				}
				if got[2] != want[2] {
					t.Errorf("%s: cost total %q, want %q\n%s", f[col["MODEL"]], got[2], want[2], b.String())
				}
			}
		})
	}
}

// near reports whether cell, "-" or a dollar figure, is within the
// sketches' accuracy (and the cell's three digits) of want.
func near(cell, want string) bool {
	if want == "-" || cell == "-" {
		return cell == want
	}
	got, err1 := strconv.ParseFloat(strings.TrimPrefix(cell, "$"), 64)
	w, err2 := strconv.ParseFloat(want, 64)
	return err1 == nil && err2 == nil && math.Abs(got-w) <= w*(RelativeAccuracy+0.005)
}

// TestFormatUSD: three significant digits below a dollar, cents above.
func TestFormatUSD(t *testing.T) {
	for _, tt := range []struct {
		in   float64
		want string
	}{
		{0, "$0.00"},
		{0.5, "$0.500"},
		{0.0123456, "$0.0123"},
		{0.000125, "$0.000125"},
		{8.4e-05, "$0.0000840"},
		{3e-9, "$0.000000003"},
		{1, "$1.00"},
		{1234.567, "$1234.57"},
	} {
		if got := formatUSD(tt.in); got != tt.want {
			t.Errorf("formatUSD(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestWriteTableSLO: SLO% and GOODPUT appear when an objective judged some
// request, "-" for a row it judged none of.
func TestWriteTableSLO(t *testing.T) {
	s := newTestStore(0)
	for i := range 4 {
		smp := only(OutputTokens, 300)
		smp.SLOJudged, smp.SLOMet = true, i > 0
		record(s, key("openai", "gpt-a"), smp, time.Second)
	}
	record(s, key("openai", "gpt-b"), only(OutputTokens, 300), time.Second)
	now := at(2 * time.Second)
	o, _ := ParseTableSort("model")
	var b strings.Builder
	if err := WriteTable(&b, s.Aggregate(Window1m, now).Report(now), o); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	header := strings.Fields(lines[0])
	col := map[string]int{}
	for i, h := range header {
		col[h] = i
	}
	// Three of four met, 900 goodput tokens over 60 s.
	want := map[string][2]string{"gpt-a": {"75.0%", "15.0"}, "gpt-b": {"-", "-"}}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if got := [2]string{f[col["SLO%"]], f[col["GOODPUT"]]}; got != want[f[col["MODEL"]]] {
			t.Errorf("%s: SLO%%, GOODPUT %v, want %v\n%s", f[col["MODEL"]], got, want[f[col["MODEL"]]], b.String())
		}
	}

	b.Reset()
	s = newTestStore(0)
	record(s, key("openai", "gpt-b"), only(OutputTokens, 300), time.Second)
	if err := WriteTable(&b, s.Aggregate(Window1m, now).Report(now), o); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "SLO%") || strings.Contains(b.String(), "GOODPUT") {
		t.Errorf("SLO columns without an objective:\n%s", b.String())
	}
}

// TestWriteTableHealth: HEALTH says ok or slow, and "-" while a row has too
// few requests to judge or has no health (the overflow row).
func TestWriteTableHealth(t *testing.T) {
	rep := &Report{Rows: []ReportRow{
		{RowID: RowID{Provider: "p", Model: "a"}, Health: &HealthReport{State: "slow"}},
		{RowID: RowID{Provider: "p", Model: "b"}, Health: &HealthReport{State: "ok"}},
		{RowID: RowID{Provider: "p", Model: "c"}, Health: &HealthReport{State: "insufficient_data"}},
		{RowID: RowID{Provider: "_other", Model: "_other", Overflow: true}},
	}}
	o, _ := ParseTableSort("model")
	var b strings.Builder
	if err := WriteTable(&b, rep, o); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	col := -1
	for i, h := range strings.Fields(lines[0]) {
		if h == "HEALTH" {
			col = i
		}
	}
	if col < 0 {
		t.Fatalf("no HEALTH column:\n%s", b.String())
	}
	want := map[string]string{"a": "slow", "b": "ok", "c": "-", "_other": "-"}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if f[col] != want[f[1]] {
			t.Errorf("%s: HEALTH %q, want %q", f[1], f[col], want[f[1]])
		}
	}
}
