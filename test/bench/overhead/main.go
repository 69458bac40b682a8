// Command overhead measures what tokentap costs a stream, against plain
// Caddy reverse_proxy as the physical limit, in one run on one machine.
//
// The simulator runs as its own process (the built tokentap binary with a
// simulator-only Caddyfile) and streams OpenAI chat completions whose every
// write carries its send time (simulator.HeaderStamp). Four paths lead to
// it: direct, plain Caddy reverse_proxy, Caddy with tokentap, and a second
// plain Caddy, identical to the first, whose difference from it is the
// machine's noise floor (an A/A control). Each proxy is its own process
// from the same binary. At each concurrency the paths take turns, in the
// orders of a Williams square (A B C D, D C B A, C A D B, B D A C, ...), so
// that drift in the machine's load falls on all of them alike and no path
// keeps a position in the round.
//
// Per path it reports the client's time to first token, each event's
// delivery delay (client arrival minus upstream write, one clock) and what
// a proxy adds to it over plain Caddy next to the A/A difference, the
// proxy's CPU seconds per million events (/proc/<pid>/stat, over the
// whole level and a drain after it, so that work deferred past a cell
// counts), and its resident memory per open stream. For the tokentap path
// it compares what tokentap measured (its exported spans, received by
// internal/otlpsink in a process of its own: this program's sink
// subcommand) with what the client measured.
//
// Usage, from the repository root (test/bench/overhead.sh wraps it):
//
//	go build -o /tmp/tokentap ./cmd/tokentap
//	go run ./test/bench/overhead --binary /tmp/tokentap [--short] [--json out.json]
//
// A full run's --json file, kept under test/bench/results, is the data of
// docs/BENCHMARKS.md's current results; --render prints them from it, and
// TestBenchmarksDoc holds the document to the newest file:
//
//	go run ./test/bench/overhead --render test/bench/results/<date>-<commit>.json
//
// Two builds, or one against its A/A control, over a series of whole runs
// with a summary of each build's figures and their paired difference, and
// for two builds that difference split into the builds' share and the
// paths' (a crossover analysis, crossover.go):
//
//	go run ./test/bench/overhead --binary /tmp/new --compare /tmp/old --runs 4
//
// What tokentap adds, by function, from a CPU profile of each proxy:
//
//	go run ./test/bench/overhead --binary /tmp/tokentap --rounds 1 --profile tt.pprof --profile-baseline caddy.pprof
//	go tool pprof -top -cum -diff_base caddy.pprof tt.pprof
//
// Everything listens on 127.0.0.1 only: ports 9350-9353 and 9359 (OTLP),
// admin 2350-2353, unless --port-base and --admin-base move them. Every
// count and duration is bounded.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// level is one concurrency the paths are compared at, with the stream
// shape used there: per-stream rates fall as concurrency rises, as they do
// on a loaded real server, and keep the machine below saturation so that
// what is measured is the proxies, not a queue.
type level struct {
	Concurrency     int     `json:"concurrency"`
	TokensPerSecond float64 `json:"tokens_per_second"`
	Tokens          int     `json:"tokens"`
}

// options are the benchmark's settings.
type options struct {
	binary string
	// compare, when set, is a second tokentap binary run as the fourth
	// path, with tokentap, in place of the A/A control: two builds
	// compared in one interleaved run, the only way to tell a change of a
	// few per cent from the machine's drift between runs.
	compare string
	// runs is how many whole runs to make, the builds swapped each run
	// with --compare, summarised per build with 95 % intervals.
	runs       int
	short      bool
	levels     []level
	rounds     int
	cell       time.Duration
	ttft       time.Duration
	rssStreams int
	jsonOut    string
	profile    string
	// profileBase, when set, also profiles plain Caddy under the same
	// load, so that `go tool pprof -diff_base` shows what tokentap adds,
	// the runtime's share (scheduler, allocation, collection) included,
	// which a profile of tokentap alone cannot tell from Caddy's own.
	profileBase string
	profileAt   int
	profileFor  time.Duration
	portBase    int
	adminBase   int
	workDir     string
	// suite, when "stream", runs the public streaming suite (suite.go)
	// instead of the levels; suiteStreams, suitePlain and suiteMax size it.
	suite        string
	suiteStreams int
	suitePlain   int
	suiteMax     int
	// render, when set, names a results file written by --json whose
	// figures are printed as docs/BENCHMARKS.md's current results; no
	// benchmark runs.
	render string
}

// defaultLevels are the three concurrencies the targets are set at. At 64 and 512 streams
// the machine carries about 6,400 and 10,000 events a second, well below
// what two cores can move, so that delays are the proxies' own and not a
// queue's; --short keeps the levels and shortens the rounds.
var defaultLevels = []level{{1, 200, 100}, {64, 100, 50}, {512, 20, 20}}

func parseOptions(args []string) (options, error) {
	fs := flag.NewFlagSet("overhead", flag.ContinueOnError)
	var o options
	var levels string
	fs.StringVar(&o.binary, "binary", "", "the built tokentap binary (default: go build ./cmd/tokentap into the work directory)")
	fs.StringVar(&o.compare, "compare", "", "a second tokentap binary, run with tokentap as the fourth path in place of the A/A control (an A/B of two builds; no targets are judged)")
	fs.IntVar(&o.runs, "runs", 1, "whole runs to make in turn, 1 to 20; with --compare the two builds swap paths each run; a summary gives each build's CPU vs Caddy and added p99 per run with 95 % intervals, their paired difference, and that difference split into the builds' share and the paths'")
	fs.BoolVar(&o.short, "short", false, "a shortened run for CI: 2 rounds of 2 s cells, 128 streams for memory")
	fs.StringVar(&levels, "levels", "", `concurrency levels as "concurrency:tokens-per-second:tokens,..." (default "1:200:100,64:100:50,512:20:20")`)
	fs.IntVar(&o.rounds, "rounds", 0, "rounds per level, the paths in the orders of a Williams square, which a multiple of 4 balances (default 8, --short 2)")
	fs.DurationVar(&o.cell, "cell", 0, "time each path is loaded per round (default 2.5s, --short 2s)")
	fs.DurationVar(&o.ttft, "ttft", 20*time.Millisecond, "the simulator's time to first token")
	fs.IntVar(&o.rssStreams, "rss-streams", 0, "open streams for the memory measurement (default 512, --short 128)")
	fs.StringVar(&o.jsonOut, "json", "", "also write the report as JSON to this file")
	fs.StringVar(&o.profile, "profile", "", "after the rounds, take a CPU profile of the tokentap proxy under load into this file")
	fs.StringVar(&o.profileBase, "profile-baseline", "", "with --profile, also profile plain Caddy under the same load into this file (for go tool pprof -diff_base)")
	fs.IntVar(&o.profileAt, "profile-concurrency", 64, "the concurrency level (one of --levels) to profile at")
	fs.DurationVar(&o.profileFor, "profile-duration", 10*time.Second, "how long to profile, e.g. 20s")
	fs.IntVar(&o.portBase, "port-base", 9350, "the simulator's port; the proxies use the next three, the OTLP sink base+9")
	fs.IntVar(&o.adminBase, "admin-base", 2350, "the simulator's admin port; the proxies use the next three")
	fs.StringVar(&o.render, "render", "", "print the Markdown of a results file written by --json, as docs/BENCHMARKS.md shows it, and run nothing")
	fs.StringVar(&o.suite, "suite", "", `"stream": run the benchmark boards' public streaming suite on the four paths instead of the levels (a role chunk and 64 frames 20 ms apart; added first frame and gap, streams sustained, memory, non-streamed p99)`)
	fs.IntVar(&o.suiteStreams, "suite-streams", 0, "with --suite: streams per path at one at a time (default 64, --short 8)")
	fs.IntVar(&o.suitePlain, "suite-plain", 0, "with --suite: non-streamed requests per path at one at a time (default 400, --short 40)")
	fs.IntVar(&o.suiteMax, "suite-max", 0, "with --suite: the sweep's highest concurrency, 1 to 512 (default 512, --short 64)")
	fs.StringVar(&o.workDir, "workdir", "", "keep configs and logs here (default: a temporary directory, removed after a successful run)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.levels = defaultLevels
	if levels != "" {
		var err error
		if o.levels, err = parseLevels(levels); err != nil {
			return o, err
		}
	}
	def := func(v *int, normal, short int) {
		if *v == 0 {
			*v = normal
			if o.short {
				*v = short
			}
		}
	}
	// Many short cells rather than a few long ones: a change in the
	// machine's load then falls on every path in about equal parts.
	def(&o.rounds, 8, 2)
	def(&o.rssStreams, 512, 128)
	def(&o.suiteStreams, 64, 8)
	def(&o.suitePlain, 400, 40)
	def(&o.suiteMax, 512, 64)
	if o.cell == 0 {
		o.cell = 2500 * time.Millisecond
		if o.short {
			o.cell = 2 * time.Second
		}
	}
	var errs []error
	if o.rounds < 1 || o.rounds > 100 {
		errs = append(errs, fmt.Errorf("rounds must be 1 to 100, got %d", o.rounds))
	}
	if o.cell < 100*time.Millisecond || o.cell > 10*time.Minute {
		errs = append(errs, fmt.Errorf("cell must be 100ms to 10m, got %s", o.cell))
	}
	if o.ttft < 0 || o.ttft > time.Minute {
		errs = append(errs, fmt.Errorf("ttft must be 0 to 1m, got %s", o.ttft))
	}
	if o.rssStreams < 1 || o.rssStreams > 4096 {
		errs = append(errs, fmt.Errorf("rss-streams must be 1 to 4096, got %d", o.rssStreams))
	}
	if o.profileFor < time.Second || o.profileFor > 5*time.Minute {
		errs = append(errs, fmt.Errorf("profile-duration must be 1s to 5m, got %s", o.profileFor))
	}
	if o.runs < 1 || o.runs > 20 {
		errs = append(errs, fmt.Errorf("runs must be 1 to 20, got %d", o.runs))
	}
	if o.runs > 1 && o.profile != "" {
		errs = append(errs, errors.New("profile is taken in a single run: leave out --runs"))
	}
	switch {
	case o.suite != "" && o.suite != "stream":
		errs = append(errs, fmt.Errorf("suite %q: the one suite is stream", o.suite))
	case o.suite != "" && (o.runs > 1 || o.compare != "" || o.profile != ""):
		errs = append(errs, errSuiteOnly)
	}
	if o.suiteStreams < 1 || o.suiteStreams > 10000 || o.suitePlain < 1 || o.suitePlain > 100000 || o.suiteMax < 1 || o.suiteMax > 512 {
		errs = append(errs, fmt.Errorf("suite-streams 1-10000, suite-plain 1-100000, suite-max 1-512; got %d, %d, %d", o.suiteStreams, o.suitePlain, o.suiteMax))
	}
	if o.profileBase != "" && o.profile == "" {
		errs = append(errs, errors.New("profile-baseline needs --profile"))
	}
	if o.profile != "" && !hasLevel(o.levels, o.profileAt) {
		errs = append(errs, fmt.Errorf("profile-concurrency %d is not one of the levels", o.profileAt))
	}
	return o, errors.Join(errs...)
}

func hasLevel(levels []level, c int) bool {
	for _, l := range levels {
		if l.Concurrency == c {
			return true
		}
	}
	return false
}

// parseLevels reads "c:rate:tokens,..." with bounds that keep a run finite
// and a stream's events distinct.
func parseLevels(s string) ([]level, error) {
	var out []level
	for _, part := range strings.Split(s, ",") {
		f := strings.Split(strings.TrimSpace(part), ":")
		if len(f) != 3 {
			return nil, fmt.Errorf("level %q: want concurrency:tokens-per-second:tokens", part)
		}
		c, err1 := strconv.Atoi(f[0])
		rate, err2 := strconv.ParseFloat(f[1], 64)
		n, err3 := strconv.Atoi(f[2])
		if err := errors.Join(err1, err2, err3); err != nil {
			return nil, fmt.Errorf("level %q: %w", part, err)
		}
		if c < 1 || c > 4096 || !(rate > 0 && rate <= 100000) || n < 2 || n > 100000 {
			return nil, fmt.Errorf("level %q: concurrency 1-4096, rate (0, 100000], tokens 2-100000", part)
		}
		out = append(out, level{c, rate, n})
	}
	return out, nil
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "sink" {
		if err := runSink(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "overhead sink:", err)
			os.Exit(1)
		}
		return
	}
	o, err := parseOptions(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "overhead:", err)
		os.Exit(2)
	}
	if o.render != "" {
		rep, err := readReport(o.render)
		if err != nil {
			fmt.Fprintln(os.Stderr, "overhead:", err)
			os.Exit(1)
		}
		rep.writeResults(os.Stdout)
		return
	}
	// The client's garbage collection stalls would add to every path's
	// delays alike; fewer collections make the noise floor lower.
	debug.SetGCPercent(400)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.runs > 1 {
		if err := mainSeries(ctx, o); err != nil {
			fmt.Fprintln(os.Stderr, "overhead:", err)
			os.Exit(1)
		}
		return
	}
	rep, err := run(ctx, o, os.Stderr)
	if rep != nil {
		rep.writeMarkdown(os.Stdout)
		if o.jsonOut != "" {
			if werr := writeJSON(o.jsonOut, rep); werr != nil {
				err = errors.Join(err, werr)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "overhead:", err)
		os.Exit(1)
	}
}

// mainSeries makes the --runs runs, printing each run's report and then
// the summary, which --json also writes.
func mainSeries(ctx context.Context, o options) error {
	if o.binary == "" {
		// One build for every run, not one per run.
		dir, err := os.MkdirTemp("", "tokentap-overhead-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if o.binary, err = buildBinary(ctx, dir); err != nil {
			return err
		}
	}
	s, err := runSeries(ctx, o, os.Stderr, os.Stdout)
	s.writeMarkdown(os.Stdout)
	if o.jsonOut != "" {
		err = errors.Join(err, writeJSON(o.jsonOut, s))
	}
	return err
}

// readReport reads a single run's results file, as --json writes it.
func readReport(path string) (*report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rep.Levels) == 0 {
		return nil, fmt.Errorf("%s: not a single run's results (no levels; a --runs series is not rendered)", path)
	}
	return &rep, nil
}

func writeJSON(path string, rep any) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// buildBinary builds ./cmd/tokentap into dir, from the module root that
// `go env GOMOD` names.
func buildBinary(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("run from inside the tokentap module, or pass --binary")
	}
	bin := filepath.Join(dir, "tokentap")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/tokentap")
	cmd.Dir = filepath.Dir(gomod)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/tokentap: %w", err)
	}
	return bin, nil
}
