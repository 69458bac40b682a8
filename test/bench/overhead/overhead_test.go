package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/tokentap/tokentap/caddymodule"
	"github.com/tokentap/tokentap/internal/loadgen"
	_ "github.com/tokentap/tokentap/internal/simulator"
	"github.com/tokentap/tokentap/internal/testutil/otlpsink"
)

func TestParseStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name string
		stat string
		want int64
		err  bool
	}{
		{name: "plain", stat: "4242 (tokentap) S 1 4242 4242 0 -1 4194560 1234 0 0 0 150 37 0 0 20 0 9 0 100 1000 200 18446744073709551615", want: 187},
		{name: "name with spaces and parentheses", stat: "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 1 1", want: 7},
		{name: "no name", stat: "7 tokentap R 1", err: true},
		{name: "cut short", stat: "7 (t) R 1 7 7 0", err: true},
		{name: "not a number", stat: "7 (t) R 1 7 7 0 -1 0 0 0 0 0 x 4 0", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tc.stat))
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("got %d, %v; want %d (error: %v)", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestParseStatusRSS(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		want         int64
		err          bool
	}{
		{name: "present", status: "Name:\ttokentap\nVmPeak:\t  900 kB\nVmRSS:\t   61440 kB\nRssAnon:\t 1 kB\n", want: 61440 << 10},
		{name: "absent (a zombie)", status: "Name:\ttokentap\nState:\tZ (zombie)\n", err: true},
		{name: "other unit", status: "VmRSS:\t 12 MB\n", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatusRSS([]byte(tc.status))
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("got %d, %v; want %d (error: %v)", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestQuantile(t *testing.T) {
	sorted := []int64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}
	for _, tc := range []struct {
		name   string
		values []int64
		q      float64
		want   int64
	}{
		{name: "median of ten is the fifth", values: sorted, q: 0.5, want: 50},
		{name: "p99 of ten is the largest", values: sorted, q: 0.99, want: 100},
		{name: "p90 of ten is the ninth", values: sorted, q: 0.9, want: 90},
		{name: "p0 is the smallest", values: sorted, q: 0, want: 10},
		{name: "one value", values: []int64{7}, q: 0.99, want: 7},
		{name: "none", values: nil, q: 0.5, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quantile(tc.values, tc.q); got != tc.want {
				t.Errorf("quantile(%v, %v) = %d, want %d", tc.values, tc.q, got, tc.want)
			}
		})
	}
	if m := median([]int64{3, 1, 2}); m != 2 {
		t.Errorf("median of unsorted 3 1 2 = %d, want 2", m)
	}
}

func TestParseOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, o options)
	}{
		{name: "defaults", check: func(t *testing.T, o options) {
			if o.rounds != 8 || o.cell != 2500*time.Millisecond || o.rssStreams != 512 || len(o.levels) != 3 || o.levels[1] != (level{64, 100, 50}) {
				t.Errorf("%+v", o)
			}
		}},
		{name: "short", args: []string{"--short"}, check: func(t *testing.T, o options) {
			if o.rounds != 2 || o.cell != 2*time.Second || o.rssStreams != 128 || len(o.levels) != 3 {
				t.Errorf("%+v", o)
			}
		}},
		{name: "short with an override", args: []string{"--short", "--rounds", "6"}, check: func(t *testing.T, o options) {
			if o.rounds != 6 || o.cell != 2*time.Second {
				t.Errorf("%+v", o)
			}
		}},
		{name: "levels", args: []string{"--levels", "2:50:10, 8:12.5:4"}, check: func(t *testing.T, o options) {
			if len(o.levels) != 2 || o.levels[0] != (level{2, 50, 10}) || o.levels[1] != (level{8, 12.5, 4}) {
				t.Errorf("%+v", o.levels)
			}
		}},
		{name: "compare", args: []string{"--binary", "/b/new", "--compare", "/b/old"}, check: func(t *testing.T, o options) {
			if o.binary != "/b/new" || o.compare != "/b/old" {
				t.Errorf("%+v", o)
			}
		}},
		{name: "level missing a field", args: []string{"--levels", "2:50"}, wantErr: "concurrency:tokens-per-second:tokens"},
		{name: "level out of bounds", args: []string{"--levels", "0:50:10"}, wantErr: "concurrency 1-4096"},
		{name: "one-token streams have no gaps", args: []string{"--levels", "1:50:1"}, wantErr: "tokens 2-100000"},
		{name: "unbounded cell", args: []string{"--cell", "1h"}, wantErr: "cell"},
		{name: "profile at a level not run", args: []string{"--profile", "p", "--profile-concurrency", "7"}, wantErr: "not one of the levels"},
		{name: "runs out of bounds", args: []string{"--runs", "21"}, wantErr: "runs must be 1 to 20"},
		{name: "a profile in a series", args: []string{"--runs", "2", "--profile", "p"}, wantErr: "profile is taken in a single run"},
		{name: "runs", args: []string{"--runs", "4", "--compare", "/b/old"}, check: func(t *testing.T, o options) {
			if o.runs != 4 {
				t.Errorf("%+v", o)
			}
		}},
		{name: "baseline profile alone", args: []string{"--profile-baseline", "c.pprof"}, wantErr: "profile-baseline needs --profile"},
		{name: "baseline profile", args: []string{"--profile", "t.pprof", "--profile-baseline", "c.pprof"}, check: func(t *testing.T, o options) {
			if o.profile != "t.pprof" || o.profileBase != "c.pprof" {
				t.Errorf("%+v", o)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseOptions(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, o)
		})
	}
}

func TestRoundOrder(t *testing.T) {
	var got []string
	for r := range 5 {
		var keys string
		for _, p := range roundOrder(r) {
			keys += string(rune('A' + p))
		}
		got = append(got, keys)
	}
	if want := "ABCD DCBA CADB BDAC ABCD"; strings.Join(got, " ") != want {
		t.Errorf("rounds %v, want %s", got, want)
	}
	// Over four rounds every path takes every position once and follows
	// every other path once.
	var positions [numPaths][numPaths]int
	follows := map[[2]int]int{}
	for r := range 4 {
		o := roundOrder(r)
		for i, p := range o {
			positions[p][i]++
			if i > 0 {
				follows[[2]int{o[i-1], p}]++
			}
		}
	}
	for p := range numPaths {
		for i := range numPaths {
			if positions[p][i] != 1 {
				t.Errorf("path %c at position %d %d times in four rounds", 'A'+p, i+1, positions[p][i])
			}
		}
	}
	if len(follows) != numPaths*(numPaths-1) {
		t.Errorf("%d ordered pairs of neighbours in four rounds, want %d: %v", len(follows), numPaths*(numPaths-1), follows)
	}
	// Two rounds (--short): Caddy, tokentap and the fourth path have the
	// same mean position.
	var sum [numPaths]int
	for r := range 2 {
		for i, p := range roundOrder(r) {
			sum[p] += i
		}
	}
	if sum[pathCaddy] != sum[pathTokentap] || sum[pathCaddy] != sum[pathControl] {
		t.Errorf("positions summed over two rounds %v: Caddy, tokentap and the fourth path differ", sum)
	}
}

// TestAllOpen checks that the memory figure only uses samples taken while
// every stream was between its first and last token.
func TestAllOpen(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	results := []*loadgen.Result{
		{Start: at(0), FirstToken: 1000 * time.Millisecond, LastToken: 4000 * time.Millisecond},
		{Start: at(300), FirstToken: 1000 * time.Millisecond, LastToken: 3000 * time.Millisecond}, // open 1300..3300
	}
	var samples []rssSample
	for ms := 0; ms <= 5000; ms += 500 {
		samples = append(samples, rssSample{at(ms), int64(ms)})
	}
	got := allOpen(results, samples)
	want := []int64{1500, 2000, 2500, 3000}
	if len(got) != len(want) {
		t.Fatalf("samples %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("samples %v, want %v", got, want)
		}
	}
}

// TestTargets checks the verdicts on a report whose figures are known: the
// tokentap path adds 15 µs at the median (met), 40 µs at p99 where the A/A
// difference is 30 µs (missed), 1.05 times Caddy's CPU (met), 20 KiB per
// stream (missed) and is accurate at the one level.
func TestTargets(t *testing.T) {
	rows := []pathRow{
		{Path: "direct", AddedP50us: ptr(-60), AddedP99us: ptr(-90)},
		{Path: "caddy", CPUVsCaddy: ptr(1)},
		{Path: "tap", AddedP50us: ptr(15), AddedP99us: ptr(40), CPUVsCaddy: ptr(1.05)},
		{Path: "control", AddedP50us: ptr(2), AddedP99us: ptr(-30), CPUVsCaddy: ptr(0.98)},
	}
	rep := &report{
		Levels:   []levelReport{{level: level{Concurrency: 64}, Paths: rows}},
		Memory:   memoryReport{Streams: 512, Rows: []memoryRow{{Path: "caddy"}, {Path: "tap", VsCaddyKiB: ptr(20)}, {Path: "control", VsCaddyKiB: ptr(1)}}},
		Accuracy: []accuracyRow{{Concurrency: 64, Matched: 100, TTFTDiffP50ms: 0.4, RateDiffP50pct: -2.5}},
	}
	got := map[string]bool{}
	for _, tg := range rep.targets() {
		got[tg.Name] = tg.Met
	}
	want := map[string]bool{
		"added per-event delay p50, concurrency 64":       true,
		"added per-event delay p99, concurrency 64":       false,
		"proxy CPU per event, concurrency 64":             true,
		"memory per open stream (512 streams)":            false,
		"TTFT accuracy at the median, concurrency 64":     true,
		"tokens/s accuracy at the median, concurrency 64": false,
	}
	if len(got) != len(want) {
		t.Errorf("targets %v, want %v", got, want)
	}
	for name, met := range want {
		if m, ok := got[name]; !ok || m != met {
			t.Errorf("%s: met %v (present %v), want %v", name, m, ok, met)
		}
	}
}

// TestCaddyfiles adapts the configs the benchmark writes, with the modules
// the binary has: the plain proxies must not have tokentap, the tokentap
// proxy must, and all must bind loopback only.
func TestCaddyfiles(t *testing.T) {
	adapter := caddyconfig.GetAdapter("caddyfile")
	for _, tc := range []struct {
		name, text string
		has, lacks []string
	}{
		{name: "simulator", text: simCaddyfile("127.0.0.1:2350", 9350), has: []string{`"tokentap_simulator"`, `"127.0.0.1:2350"`}, lacks: []string{`"handler":"tokentap"`}},
		{name: "plain", text: proxyCaddyfile("127.0.0.1:2351", 9351, "127.0.0.1:9350", false), has: []string{`"reverse_proxy"`, `"max_idle_conns_per_host":1024`}, lacks: []string{`"handler":"tokentap"`}},
		{name: "tokentap", text: proxyCaddyfile("127.0.0.1:2352", 9352, "127.0.0.1:9350", true), has: []string{`"handler":"tokentap"`, `"reverse_proxy"`, `"max_idle_conns_per_host":1024`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, warnings, err := adapter.Adapt([]byte(tc.text), nil)
			if err != nil {
				t.Fatalf("%v\n%s", err, tc.text)
			}
			if len(warnings) > 0 {
				t.Errorf("warnings: %v", warnings)
			}
			var cfg struct {
				Apps struct {
					HTTP struct {
						Servers map[string]struct {
							Listen []string `json:"listen"`
						} `json:"servers"`
					} `json:"http"`
				} `json:"apps"`
			}
			if err := json.Unmarshal(out, &cfg); err != nil {
				t.Fatal(err)
			}
			for name, srv := range cfg.Apps.HTTP.Servers {
				for _, l := range srv.Listen {
					if !strings.HasPrefix(l, "127.0.0.1:") {
						t.Errorf("server %s listens on %s, not loopback only", name, l)
					}
				}
			}
			for _, s := range tc.has {
				if !strings.Contains(string(out), s) {
					t.Errorf("config lacks %s: %s", s, out)
				}
			}
			for _, s := range tc.lacks {
				if strings.Contains(string(out), s) {
					t.Errorf("config has %s: %s", s, out)
				}
			}
		})
	}
}

// TestSpansRoundTrip checks the sink process's file: what writeSpans keeps
// of a span is what readSpans gives back, spans without a response id are
// left out, and an absent rate stays absent rather than becoming zero.
func TestSpansRoundTrip(t *testing.T) {
	path := t.TempDir() + "/spans.jsonl"
	in := []otlpsink.Span{
		{Attributes: map[string]any{"gen_ai.response.id": "a", "tokentap.time_to_first_token": 0.021, "tokentap.output_tokens_per_second": 99.5}},
		{Attributes: map[string]any{"gen_ai.response.id": "b", "tokentap.time_to_first_token": 0.5}},
		{Attributes: map[string]any{"tokentap.time_to_first_token": 0.1}},
	}
	if err := writeSpans(path, in); err != nil {
		t.Fatal(err)
	}
	got, err := readSpans(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ResponseID != "a" || *got[0].TTFT != 0.021 || *got[0].Rate != 99.5 ||
		got[1].ResponseID != "b" || *got[1].TTFT != 0.5 || got[1].Rate != nil {
		t.Errorf("read back %+v", got)
	}
}

// TestAccuracy checks the matching of spans to requests: by response id,
// per level, client minus tokentap, with requests that have no span counted
// and a span's missing rate not taken for a zero.
func TestAccuracy(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	b := &bench{
		o: options{levels: []level{{Concurrency: 1}, {Concurrency: 64}}},
		byID: map[string]clientView{
			"r1": {level: 0, ttft: 21 * time.Millisecond, rate: 100},
			"r2": {level: 1, ttft: 30 * time.Millisecond, rate: 200},
			"r3": {level: 1, ttft: 40 * time.Millisecond, rate: 50},
			"r4": {level: 1, ttft: 50 * time.Millisecond, rate: 50}, // no span
		},
	}
	spans := []sinkSpan{
		{ResponseID: "r1", TTFT: f(0.0205), Rate: f(101)},
		{ResponseID: "r2", TTFT: f(0.029), Rate: f(202)},
		{ResponseID: "r3", TTFT: f(0.0385)},                // rate undefined
		{ResponseID: "r1", TTFT: f(1), Rate: f(1)},         // a duplicate is ignored
		{ResponseID: "other", TTFT: f(0.001), Rate: f(10)}, // not the benchmark's
	}
	rows := accuracy(b, spans)
	if len(rows) != 2 {
		t.Fatalf("rows %+v", rows)
	}
	r0, r1 := rows[0], rows[1]
	if r0.Matched != 1 || r0.Unmatched != 0 || r0.TTFTDiffP50ms != 0.5 || r0.RateDiffP50pct != 1 {
		t.Errorf("level 1: %+v", r0)
	}
	// Level 64: differences 1.0 and 1.5 ms; one rate (+1 %) and one
	// undefined.
	if r1.Matched != 2 || r1.Unmatched != 1 || r1.TTFTDiffP50ms != 1.0 || r1.TTFTDiffP99ms != 1.5 ||
		r1.RateDiffP50pct != 1 || r1.RateUndefinedSpans != 1 {
		t.Errorf("level 64: %+v", r1)
	}
}

// TestRowCPU checks that a proxy's CPU per event counts the whole level,
// its own cells and the rest, and says how much was outside its cells.
func TestRowCPU(t *testing.T) {
	for _, tc := range []struct {
		name              string
		s                 samples
		proxied           bool
		perMillion, share float64
		wantCPU           bool
	}{
		{name: "deferred work counted", s: samples{events: 200_000, cpuTicks: 800, cellTicks: 780,
			cells: []cellCPU{{Round: 0, Ticks: 390, Events: 100_000}, {Round: 1, Ticks: 390, Events: 100_000}}}, proxied: true,
			perMillion: 8.0 / 200_000 * 1e6, share: 20.0 / 800, wantCPU: true},
		{name: "all inside the cells", s: samples{events: 100_000, cpuTicks: 400, cellTicks: 400}, proxied: true,
			perMillion: 4.0 / 100_000 * 1e6, share: 0, wantCPU: true},
		{name: "the direct path has no proxy", s: samples{events: 100_000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.s.row("p", tc.proxied)
			if !tc.wantCPU {
				if r.CPUSeconds != nil || r.CPUPerMillionEvents != nil || r.CPUOutsideCells != nil {
					t.Fatalf("CPU figures on a path without a proxy: %+v", r)
				}
				return
			}
			if r.CPUPerMillionEvents == nil || math.Abs(*r.CPUPerMillionEvents-tc.perMillion) > 1e-9 {
				t.Errorf("CPU s per M events %v, want %v", r.CPUPerMillionEvents, tc.perMillion)
			}
			if r.CPUOutsideCells == nil || math.Abs(*r.CPUOutsideCells-tc.share) > 1e-9 {
				t.Errorf("share outside the cells %v, want %v", r.CPUOutsideCells, tc.share)
			}
			if len(r.Cells) != len(tc.s.cells) {
				t.Errorf("%d cells in the row, want %d", len(r.Cells), len(tc.s.cells))
			}
		})
	}
}
