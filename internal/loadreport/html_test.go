package loadreport

import (
	"encoding/json"
	"html"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tokentap/tokentap/internal/loadgen"
)

var (
	panelRE  = regexp.MustCompile(`<section class="panel" id="[^"]*" data-panel="([^"]*)">`)
	chartRE  = regexp.MustCompile(`<figure class="figure" data-chart="([^"]*)">`)
	legendRE = regexp.MustCompile(`<li><svg [^>]*>.*?</svg><span>([^<]*)</span></li>`)
	styleRE  = regexp.MustCompile(`(?s)<style>(.*?)</style>`)
	cspRE    = regexp.MustCompile(`<meta http-equiv="Content-Security-Policy" content="([^"]*)">`)
	dataRE   = regexp.MustCompile(`(?s)<script type="application/json" id="tokentap-load-reports">(.*?)</script>`)
)

// oldReport is a report as a tokentap without distributions and
// timelines wrote it.
func oldReport() *loadgen.Report {
	rep := fakeReport(t0, 2, fast)
	rep.Models[0].Distribution, rep.Models[0].Timeline = nil, nil
	return rep
}

func TestWrite(t *testing.T) {
	single := []string{"cdf-ttft", "cdf-tps", "time-ttft", "time-tps"}
	sweep := append([]string{"load-ttft", "load-tps"}, single...)
	for _, tc := range []struct {
		name   string
		runs   []Run
		panels map[string][]string // panel -> its charts
		legend []string            // names every legend of the page shows, among others
		empty  int                 // charts with no data
		has    []string
	}{
		{
			name:   "one run, two models: one panel",
			runs:   []Run{{Name: "run", Report: fakeReport(t0, 4, fast, slow)}},
			panels: map[string][]string{"All models": single},
			legend: []string{"fast", "slow", "p50", "p95"},
			has:    []string{"time to first token (ms)", "output rate per request (tokens/s)", "time since the run&#39;s start (s)", "requests at or under (%)"},
		},
		{
			name:   "a sweep",
			runs:   []Run{{Name: "run", Sweep: fakeSweep([]int{1, 2, 4}, fast, slow)}},
			panels: map[string][]string{"All models": sweep},
			legend: []string{"fast", "slow", "fast, concurrency 4", "slow, concurrency 1"},
			has:    []string{"load (concurrent clients)", `class="marker"`, "concurrency 2</text>"},
		},
		{
			name: "two runs: a panel per model, a line per run",
			runs: []Run{{Name: "recorded", Report: fakeReport(t0, 4, fast, slow)}, {Name: "candidate", Report: fakeReport(t0, 4, fast)}},
			panels: map[string][]string{
				"fast": single,
				"slow": single,
			},
			legend: []string{"recorded", "candidate"},
			has:    []string{"Not in candidate."},
		},
		{
			name:   "two sweeps",
			runs:   []Run{{Name: "a", Sweep: fakeSweep([]int{1, 2}, fast)}, {Name: "b", Sweep: fakeSweep([]int{2, 4}, fast)}},
			panels: map[string][]string{"fast": sweep},
			legend: []string{"a", "b", "a, concurrency 1", "b, concurrency 4"},
			has:    []string{"The vertical lines mark where a&#39;s levels began."},
		},
		{
			name:   "a report from before distributions and timelines",
			runs:   []Run{{Name: "old", Report: oldReport()}},
			panels: map[string][]string{"fast": single},
			empty:  4,
			has:    []string{"the report is older than its distribution field", "the report is older than its timeline field"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := Write(&b, "title <&>", tc.runs); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if !strings.Contains(out, "<title>title &lt;&amp;&gt;</title>") {
				t.Errorf("the title is not escaped")
			}
			// Each panel's charts, in order.
			got := map[string][]string{}
			idx := panelRE.FindAllStringSubmatchIndex(out, -1)
			for i, m := range idx {
				end := len(out)
				if i+1 < len(idx) {
					end = idx[i+1][0]
				}
				name := html.UnescapeString(out[m[2]:m[3]])
				for _, c := range chartRE.FindAllStringSubmatch(out[m[1]:end], -1) {
					got[name] = append(got[name], c[1])
				}
			}
			if len(got) != len(tc.panels) {
				t.Errorf("panels %v, want %v", got, tc.panels)
			}
			for p, want := range tc.panels {
				if !slices.Equal(got[p], want) {
					t.Errorf("panel %q: charts %v, want %v", p, got[p], want)
				}
			}
			var legend []string
			for _, m := range legendRE.FindAllStringSubmatch(out, -1) {
				legend = append(legend, html.UnescapeString(m[1]))
			}
			for _, want := range tc.legend {
				if !slices.Contains(legend, want) {
					t.Errorf("no legend names %q: %q", want, legend)
				}
			}
			if n := strings.Count(out, `<text class="empty"`); n != tc.empty {
				t.Errorf("%d charts without data, want %d", n, tc.empty)
			}
			for _, want := range tc.has {
				if !strings.Contains(out, want) {
					t.Errorf("the page lacks %q", want)
				}
			}

			// The style is allowed by its hash, and nothing else is.
			style, meta := styleRE.FindStringSubmatch(out), cspRE.FindStringSubmatch(out)
			if style == nil || meta == nil {
				t.Fatal("no style or no Content-Security-Policy")
			}
			if want := "default-src 'none'; style-src '" + hash(style[1]) + "'"; !strings.HasPrefix(html.UnescapeString(meta[1]), want) {
				t.Errorf("CSP %q, want it to start %q", html.UnescapeString(meta[1]), want)
			}
			if strings.Contains(out, "<script>") || strings.Contains(out, "http://www.w3.org") || strings.Contains(out, "https://") {
				t.Errorf("the page has a script or a link to the network")
			}

			// The reports are embedded and read back as given.
			data := dataRE.FindStringSubmatch(out)
			if data == nil {
				t.Fatal("no embedded reports")
			}
			var back []runData
			if err := json.Unmarshal([]byte(data[1]), &back); err != nil {
				t.Fatalf("embedded reports: %v", err)
			}
			if len(back) != len(tc.runs) {
				t.Fatalf("%d runs embedded, want %d", len(back), len(tc.runs))
			}
			for i, r := range tc.runs {
				if back[i].Name != r.Name || (back[i].Sweep != nil) != (r.Sweep != nil) {
					t.Errorf("run %d embedded as %q (sweep %v)", i, back[i].Name, back[i].Sweep != nil)
				}
			}
		})
	}
}

func TestWriteBadRuns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		runs    []Run
		wantErr string
	}{
		{name: "no run", wantErr: "no run to report"},
		{name: "no name", runs: []Run{{Report: fakeReport(t0, 1, fast)}}, wantErr: "run 1 has no name"},
		{name: "neither report nor sweep", runs: []Run{{Name: "a"}}, wantErr: "exactly one"},
		{name: "both", runs: []Run{{Name: "a", Report: fakeReport(t0, 1, fast), Sweep: fakeSweep([]int{1}, fast)}}, wantErr: "exactly one"},
		{name: "a sweep without levels", runs: []Run{{Name: "a", Sweep: &loadgen.SweepReport{Sweep: "rate"}}}, wantErr: "without a level"},
		{name: "a nil level", runs: []Run{{Name: "a", Sweep: &loadgen.SweepReport{Sweep: "rate", Levels: []*loadgen.Report{nil}}}}, wantErr: "level 1 is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			err := Write(&b, "", tc.runs)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if b.Len() != 0 {
				t.Errorf("wrote %d bytes for bad runs", b.Len())
			}
		})
	}
}
