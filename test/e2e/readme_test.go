//go:build linux

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// The README's quick start, and the sections of the getting-started
// tutorial that need only tokentap, are run as written, each in a network
// namespace of its own, so that their commands cannot rot. (The tutorial's
// Jaeger walk-through is TestJaegerWalkthrough's.)

// readmeSkip skips the documented-commands tests unless asked for: they
// need root (for the network namespace) and Go's build cache.
func readmeSkip(t *testing.T) {
	t.Helper()
	if testing.Short() || os.Getenv("TOKENTAP_BINARY") == "" && os.Getenv("TOKENTAP_REQUIRE_E2E") != "1" {
		t.Skip("runs the documented commands (as root, in a network namespace): set TOKENTAP_REQUIRE_E2E=1, as .ci/run does")
	}
}

// gettingStarted is the tutorial the README's quick start leads to.
const gettingStarted = "docs/getting-started.md"

// readSection reads a section's blocks from the document at rel (from the
// repository root), failing when it is not there.
func readSection(t *testing.T, rel, heading string) (string, []docBlock) {
	t.Helper()
	path := filepath.Join(testbin.RepoRoot(t), rel)
	blocks, found := docReadSection(t, path, heading)
	if !found {
		t.Fatalf("%s has no section %q", rel, heading)
	}
	return path, blocks
}

// comparisonModel finds the models a comparison section's load command
// sends to, from its --model flags: the rows its tables must show.
var comparisonModel = regexp.MustCompile(`--model[ =]+(\S+)`)

// checkComparison holds a section that starts tokentap, puts load on it
// and compares the models to its promise: it runs all three commands, and
// the load's report and the stats table each have a row for every model
// the load sent to. It returns the section's text.
func checkComparison(t *testing.T, blocks []docBlock, out [][]byte) string {
	t.Helper()
	var text string
	for _, b := range blocks {
		text += b.text
	}
	for _, want := range []string{"go run ./cmd/tokentap run", "tokentap load", "tokentap stats"} {
		if !strings.Contains(text, want) {
			t.Errorf("the section no longer runs %q", want)
		}
	}
	var models []string
	for _, b := range blocks {
		if strings.Contains(b.text, "tokentap load") {
			for _, m := range comparisonModel.FindAllStringSubmatch(b.text, -1) {
				models = append(models, m[1])
			}
		}
	}
	if len(models) < 2 {
		t.Fatalf("the section's load names %d models (%v), want at least two to compare", len(models), models)
	}
	for i, b := range blocks {
		if !strings.Contains(b.text, "tokentap load") && !strings.Contains(b.text, "tokentap stats") {
			continue
		}
		for _, model := range models {
			if !strings.Contains(string(out[i]), model) {
				t.Errorf("block at line %d: no row for %s in:\n%s", b.line, model, out[i])
			}
		}
	}
	return text
}

// TestReadmeQuickStart runs the README's "Quick start" as written:
// tokentap on the default Caddyfile, tokentap load on the simulator's
// models, and tokentap stats, whose table must have a row for each model
// sent; the comparison page the section names must answer too.
func TestReadmeQuickStart(t *testing.T) {
	readmeSkip(t)
	path, blocks := readSection(t, "README.md", "Quick start")
	d := newDocRun(t, path, nil)
	out := d.run(blocks)
	checkComparison(t, blocks, out)
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const page = "http://localhost:8082/tokentap/"
	if !strings.Contains(string(doc), page) {
		t.Fatalf("the README no longer names the comparison page %s: update this test", page)
	}
	ctx, cancel := context.WithTimeout(context.Background(), docCommandTimeout)
	defer cancel()
	if got, err := d.command(ctx, "curl -sf "+docShellQuote(page)).CombinedOutput(); err != nil {
		t.Errorf("the comparison page %s: %v\n%s", page, err, got)
	}
}

// TestReadmeLiveComparison runs the tutorial's "Live model comparison" as
// written (tokentap on the default Caddyfile, tokentap load on the
// simulator, tokentap stats, the JSON endpoints).
func TestReadmeLiveComparison(t *testing.T) {
	readmeSkip(t)
	path, blocks := readSection(t, gettingStarted, "Live model comparison")
	out := newDocRun(t, path, nil).run(blocks)
	if text := checkComparison(t, blocks, out); !strings.Contains(text, "/tokentap/stats") {
		t.Error("the section no longer reads the stats as JSON (/tokentap/stats)")
	}
}

// TestReadmeCost runs the tutorial's "Cost" section as written: tokentap on
// examples/pricing/Caddyfile, one request to the simulator, and the cost
// counter on /metrics, whose value the tutorial shows.
func TestReadmeCost(t *testing.T) {
	readmeSkip(t)
	path, blocks := readSection(t, gettingStarted, "Cost")
	newDocRun(t, path, nil).run(blocks)
}

// readmeReplayFiles are the files the tutorial's replay section writes.
var readmeReplayFiles = []string{"/tmp/tokentap-traffic*.jsonl", "/tmp/tokentap-trace.jsonl", "/tmp/tokentap-replay.html"}

// TestReadmeReplay runs the tutorial's "Compare models on your own traffic"
// as written: tokentap recording the simulator's route, tokentap load as
// the traffic, the recording as a mooncake trace, and its replay against
// the other model with the HTML report.
func TestReadmeReplay(t *testing.T) {
	readmeSkip(t)
	clean := func() {
		for _, pattern := range readmeReplayFiles {
			names, _ := filepath.Glob(pattern)
			for _, n := range names {
				_ = os.Remove(n)
			}
		}
	}
	clean()
	t.Cleanup(clean)
	path, blocks := readSection(t, gettingStarted, "Compare models on your own traffic")
	out := newDocRun(t, path, nil).run(blocks)
	var replayed bool
	for i, b := range blocks {
		if strings.Contains(b.text, "--replay") {
			replayed = true
			for _, want := range []string{"sim-fast  recorded", "sim-fast  sim-slow"} {
				if !strings.Contains(string(out[i]), want) {
					t.Errorf("the replay's table has no %q:\n%s", want, out[i])
				}
			}
		}
	}
	if !replayed {
		t.Fatal("the section no longer runs tokentap load --replay")
	}
	// The trace has the 40 recorded requests; the report names the
	// recording and the candidate.
	trace, err := os.ReadFile("/tmp/tokentap-trace.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(trace), "\n"); n != 40 || !strings.Contains(string(trace), `"input_length"`) {
		t.Errorf("the mooncake trace has %d lines, want 40:\n%.300s", n, trace)
	}
	html, err := os.ReadFile("/tmp/tokentap-replay.html")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"recorded", "sim-slow", "sim-fast"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("the HTML report does not name %q", want)
		}
	}
}
