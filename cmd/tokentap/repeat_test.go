package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokentap/tokentap/internal/loadgen"
	"github.com/tokentap/tokentap/internal/meter/tokencount"
)

// TestLoadRepeat runs --repeat against the simulator (5 tokens per answer,
// usage reported): its table and JSON, the seeds and prompts drawn per
// repetition, the tokenizer's count beside the usage, and what --repeat
// refuses.
func TestLoadRepeat(t *testing.T) {
	base, sim := startLoadSimulator(t)
	prompts := func() []string {
		sim.mu.Lock()
		defer sim.mu.Unlock()
		return slices.Clone(sim.prompts)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
		check    func(t *testing.T, out string, sent []string)
	}{
		{
			name: "table, two models",
			args: []string{"--url", base + "/v1", "--model", "a", "--model", "b", "--concurrency", "2", "--requests", "4", "--repeat", "3"},
			check: func(t *testing.T, out string, _ []string) {
				for _, want := range []string{"concurrency 2, 3 repetitions (seeds 0 to 2), 12 requests in all", "TTFT ms p50", " ± ", "95 % Student-t"} {
					if !strings.Contains(out, want) {
						t.Errorf("output lacks %q:\n%s", want, out)
					}
				}
				for _, row := range []string{"a", "b"} {
					if !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
						f := strings.Fields(l)
						return len(f) > 3 && f[0] == row && f[1] == "3" && f[2] == "6" && f[3] == "0"
					}) {
						t.Errorf("no row %q over 3 runs with 6 completed requests:\n%s", row, out)
					}
				}
			},
		},
		{
			name: "json, seeds and prompt lengths drawn per repetition",
			args: []string{"--url", base + "/v1", "--model", "a", "--rate", "50", "--arrival", "poisson", "--seed", "5",
				"--input-tokens", "40,15", "--requests", "6", "--repeat", "2", "--json"},
			check: func(t *testing.T, out string, sent []string) {
				var rr loadgen.RepeatReport
				if err := json.Unmarshal([]byte(out), &rr); err != nil {
					t.Fatalf("not a JSON repeat report: %v\n%s", err, out)
				}
				if rr.Repeat != 2 || !slices.Equal(rr.Seeds, []uint64{5, 6}) || len(rr.Runs) != 2 || len(rr.Summary.Models) != 1 {
					t.Fatalf("repeat %d, seeds %v, %d runs, %d models", rr.Repeat, rr.Seeds, len(rr.Runs), len(rr.Summary.Models))
				}
				if m := rr.Summary.Models[0]; m.Model != "a" || m.TTFTP50.N != 2 || m.TTFTP50.CILow == nil || m.Succeeded != 12 {
					t.Errorf("summary %+v", m)
				}
				c, err := tokencount.New("o200k_base")
				if err != nil {
					t.Fatal(err)
				}
				lengths := func(ps []string) []int64 {
					var n []int64
					for _, p := range ps {
						n = append(n, c.Tokens([]byte(p)))
					}
					slices.Sort(n)
					return n
				}
				first, second := lengths(sent[len(sent)-12:len(sent)-6]), lengths(sent[len(sent)-6:])
				if slices.Equal(first, second) {
					t.Errorf("both repetitions sent prompts of %v tokens: the second did not draw its own", first)
				}
				for i, rep := range rr.Runs {
					u := rep.Models[0].UsageVsTokenizer
					if rep.Tokenizer != "o200k_base" || u == nil || u.Requests != 6 || u.ReportedTokens != 30 || u.TokenizerTokens != 30 || u.Differing != 0 {
						t.Errorf("run %d: tokenizer %q, usage vs tokenizer %+v; want 6 requests of 5 tokens counted alike", i, rep.Tokenizer, u)
					}
				}
			},
		},
		{
			name: "one repetition has no interval",
			args: []string{"--url", base + "/v1", "--model", "a", "--requests", "2", "--repeat", "1"},
			check: func(t *testing.T, out string, _ []string) {
				row := slices.IndexFunc(strings.Split(out, "\n"), func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "a ") })
				if !strings.Contains(out, "1 repetition (seed 0)") || row < 0 || strings.Contains(strings.Split(out, "\n")[row], "±") {
					t.Errorf("want one repetition, means alone:\n%s", out)
				}
			},
		},
		{
			name: "a single run's table shows usage against the tokenizer",
			args: []string{"--url", base + "/v1", "--model", "a", "--requests", "2", "--tokenizer", "cl100k_base"},
			check: func(t *testing.T, out string, _ []string) {
				if want := "usage vs cl100k_base tokenizer, output tokens: a: 10 reported, 10 counted (+0.0 %), 0 of 2 requests differ."; !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			},
		},
		{name: "zero repetitions", args: []string{"--url", base, "--model", "a", "--repeat", "0"}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "--repeat 0: want 1 to 100 runs"},
		{name: "with a sweep", args: []string{"--url", base, "--model", "a", "--repeat", "2", "--sweep", "concurrency=1,2"}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "--repeat and --sweep: not supported together"},
		{name: "with a replay", args: []string{"--url", base, "--model", "a", "--repeat", "2", "--replay", "rec.jsonl"}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "--repeat and --replay: not supported together"},
		{name: "with an HTML report", args: []string{"--url", base, "--model", "a", "--repeat", "2", "--report", "r.html"}, wantCode: caddy.ExitCodeFailedStartup, wantErr: "--repeat and --report"},
		{name: "an unknown tokenizer", args: []string{"--url", base, "--model", "a", "--repeat", "2", "--tokenizer", "gpt2"}, wantCode: caddy.ExitCodeFailedStartup, wantErr: `unknown token encoding "gpt2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			code, err := runLoad(context.Background(), loadFlags(t, tc.args...), &out)
			if code != tc.wantCode || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("exit %d, error %v; want %d and an error containing %q\n%s", code, err, tc.wantCode, tc.wantErr, out.String())
			}
			if tc.check != nil {
				tc.check(t, out.String(), prompts())
			}
		})
	}
}
