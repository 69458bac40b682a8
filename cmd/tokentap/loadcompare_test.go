package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/tokentap/tokentap/internal/loadreport"
)

// compareFlags parses args as load compare would.
func compareFlags(t *testing.T, args ...string) (caddycmd.Flags, []string) {
	t.Helper()
	cmd := loadCompareCommand()
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return caddycmd.Flags{FlagSet: cmd.Flags()}, cmd.Flags().Args()
}

// loadJSON runs tokentap load with args and --json against the simulator
// and writes the report to dir/name.
func loadJSON(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if code, err := runLoad(context.Background(), loadFlags(t, append(args, "--json")...), &out); code != 0 || err != nil {
		t.Fatalf("load %q: exit %d, %v", args, code, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// charts are the data-chart names of an HTML report, in order.
func charts(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the HTML report: %v", err)
	}
	var out []string
	for _, part := range strings.Split(string(b), `<figure class="figure" data-chart="`)[1:] {
		out = append(out, part[:strings.IndexByte(part, '"')])
	}
	return out
}

func TestLoadCompare(t *testing.T) {
	base, _ := startLoadSimulator(t)
	dir := t.TempDir()
	url := base + "/v1"
	a := loadJSON(t, dir, "a.json", "--url", url, "--model", "x", "--model", "y", "--requests", "6")
	b := loadJSON(t, dir, "b.json", "--url", url, "--model", "x", "--requests", "6", "--concurrency", "3")
	sa := loadJSON(t, dir, "sweep-a.json", "--url", url, "--model", "x", "--requests", "4", "--sweep", "concurrency=1,2")
	sb := loadJSON(t, dir, "sweep-b.json", "--url", url, "--model", "x", "--requests", "4", "--sweep", "concurrency=2,4")
	sr := loadJSON(t, dir, "sweep-rate.json", "--url", url, "--model", "x", "--requests", "4", "--sweep", "rate=50")
	stats := filepath.Join(dir, "stats.json")
	notJSON := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(stats, []byte(`{"window": "5m", "rows": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(notJSON, []byte("TTFT went up\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	html := filepath.Join(dir, "compare.html")

	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
		check    func(t *testing.T, out string)
	}{
		{
			name: "two runs: a table per model, the later against the first",
			args: []string{a, b},
			check: func(t *testing.T, out string) {
				sections := map[string][]string{}
				model := ""
				for _, l := range strings.Split(out, "\n") {
					f := strings.Fields(l)
					switch {
					case len(f) == 1:
						model = f[0]
					case len(f) > 2 && (f[0] == a || f[0] == b):
						sections[model] = append(sections[model], strings.Join(f, " "))
					}
				}
				// x ran in both: b's row has its changes; y only in a.
				if len(sections["x"]) != 2 || !strings.HasPrefix(sections["x"][0], a+" 3 0 ") || !strings.HasPrefix(sections["x"][1], b+" 6 0 ") || !strings.Contains(sections["x"][1], "%") {
					t.Errorf("rows of x %q in:\n%s", sections["x"], out)
				}
				if len(sections["y"]) != 1 || strings.Contains(sections["y"][0], "%") {
					t.Errorf("rows of y %q, want a's alone, without a change, in:\n%s", sections["y"], out)
				}
				if !strings.Contains(out, "Δ TTFT p50") || !strings.Contains(out, "2 runs against the first, "+a) {
					t.Errorf("no header or no change columns:\n%s", out)
				}
			},
		},
		{
			name: "as JSON, with the HTML report",
			args: []string{"--json", "--report", html, a, b},
			check: func(t *testing.T, out string) {
				var c loadreport.Comparison
				if err := json.Unmarshal([]byte(out), &c); err != nil {
					t.Fatalf("%v in %s", err, out)
				}
				if len(c.Runs) != 2 || c.Models[0].Model != "x" || len(c.Models[0].Rows) != 2 || c.Models[0].Rows[1].Change == nil || c.Models[0].Rows[1].Change.TTFTP50 == nil {
					t.Errorf("comparison %+v", c)
				}
				// One panel per model: x in both runs, y in a alone.
				want := "cdf-ttft cdf-tps time-ttft time-tps cdf-ttft cdf-tps time-ttft time-tps"
				if got := strings.Join(charts(t, html), " "); got != want {
					t.Errorf("charts %s, want %s", got, want)
				}
			},
		},
		{
			name: "sweeps, level by level",
			args: []string{sa, sb},
			check: func(t *testing.T, out string) {
				if !strings.Contains(out, "concurrency") || strings.Count(out, sa+" ") != 2 || strings.Count(out, sb+" ") != 2 {
					t.Errorf("want a concurrency column and two rows per sweep:\n%s", out)
				}
			},
		},
		{name: "one report", args: []string{a}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "compare needs two reports or more, got 1"},
		{name: "a missing file", args: []string{a, filepath.Join(dir, "none.json")}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "none.json: no such file"},
		{name: "not JSON", args: []string{a, notJSON}, wantCode: caddy.ExitCodeFailedStartup, wantErr: notJSON + ": not JSON"},
		{name: "JSON of another shape", args: []string{stats, a}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "stats.json: not a report of tokentap load --json"},
		{name: "a run and a sweep", args: []string{a, sa}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "compare sweeps with sweeps"},
		{name: "sweeps of different parameters", args: []string{sa, sr}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "sweeps rate and"},
		{name: "a report into a missing directory", args: []string{"--report", filepath.Join(dir, "no", "r.html"), a, b}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "no directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fl, args := compareFlags(t, tc.args...)
			var out bytes.Buffer
			code, err := runCompare(args, fl, &out)
			if code != tc.wantCode || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("exit %d, error %v; want %d and an error containing %q\n%s", code, err, tc.wantCode, tc.wantErr, out.String())
			}
			if tc.check != nil {
				tc.check(t, out.String())
			}
		})
	}
}

func TestLoadHTMLReport(t *testing.T) {
	base, _ := startLoadSimulator(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name       string
		args       []string
		wantCode   int
		wantErr    string
		wantCharts string
	}{
		{
			name:       "a run of two models",
			args:       []string{"--model", "x", "--model", "y", "--requests", "6", "--report", filepath.Join(dir, "run.html")},
			wantCharts: "cdf-ttft cdf-tps time-ttft time-tps",
		},
		{
			name:       "a sweep",
			args:       []string{"--model", "x", "--requests", "4", "--sweep", "concurrency=1,2", "--json", "--report", filepath.Join(dir, "sweep.html")},
			wantCharts: "load-ttft load-tps cdf-ttft cdf-tps time-ttft time-tps",
		},
		{
			name:     "into a missing directory: refused before the run",
			args:     []string{"--model", "x", "--requests", "1", "--report", filepath.Join(dir, "no", "run.html")},
			wantCode: caddy.ExitCodeFailedStartup, wantErr: "no directory",
		},
		{
			name:     "onto a directory",
			args:     []string{"--model", "x", "--requests", "1", "--report", dir},
			wantCode: caddy.ExitCodeFailedStartup, wantErr: "is a directory",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			code, err := runLoad(context.Background(), loadFlags(t, append([]string{"--url", base + "/v1"}, tc.args...)...), &out)
			if code != tc.wantCode || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("exit %d, error %v; want %d and an error containing %q\n%s", code, err, tc.wantCode, tc.wantErr, out.String())
			}
			if tc.wantErr != "" {
				if out.Len() != 0 {
					t.Errorf("the run went ahead:\n%s", out.String())
				}
				return
			}
			path := tc.args[len(tc.args)-1]
			if got := strings.Join(charts(t, path), " "); got != tc.wantCharts {
				t.Errorf("charts %s, want %s", got, tc.wantCharts)
			}
			if out.Len() == 0 {
				t.Error("no report on standard output besides the HTML")
			}
			b, _ := os.ReadFile(path)
			if strings.Contains(string(b), `<text class="empty"`) {
				t.Errorf("a chart of a real run has no data")
			}
		})
	}
}

// TestLoadCommandHelp: load and load compare as a user reaches them, with
// their usage lines and flags.
func TestLoadCommandHelp(t *testing.T) {
	load, ok := caddycmd.Commands()["load"]
	if !ok {
		t.Fatal("load is not registered")
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{name: "load", args: []string{"--help"}, want: []string{"Usage:\n  load --url <url>", "--report string", "compare", "Compares reports of tokentap load --json"}},
		{name: "load compare", args: []string{"compare", "--help"}, want: []string{"Usage:\n  load compare <a.json> <b.json>", "--report string", "--json", "relative change"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := &cobra.Command{Use: "load " + load.Usage, Short: load.Short, Long: load.Long}
			load.CobraFunc(cmd)
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(tc.args)
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("help lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
