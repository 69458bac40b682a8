package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// TestReadmeLiveComparison runs the README's "Live model comparison"
// section as written (tokentap on the default Caddyfile, tokentap load on
// the simulator, tokentap stats, the JSON endpoints), in a network namespace
// of its own, so that its commands cannot rot.
func TestReadmeLiveComparison(t *testing.T) {
	if testing.Short() || os.Getenv("TOKENTAP_BINARY") == "" && os.Getenv("TOKENTAP_REQUIRE_E2E") != "1" {
		t.Skip("runs the documented commands (as root, in a network namespace): set TOKENTAP_REQUIRE_E2E=1, as .ci/run does")
	}
	path := filepath.Join(testbin.RepoRoot(t), "README.md")
	blocks, found := docReadSection(t, path, "Live model comparison")
	if !found {
		t.Fatal("README.md has no section \"Live model comparison\"")
	}
	var text string
	for _, b := range blocks {
		text += b.text
	}
	for _, want := range []string{"go run ./cmd/tokentap run", "tokentap load", "tokentap stats", "/tokentap/stats"} {
		if !strings.Contains(text, want) {
			t.Errorf("the section no longer runs %q", want)
		}
	}
	out := newDocRun(t, path, nil).run(blocks)
	// The load's table and the stats table both name both models.
	for i, b := range blocks {
		if !strings.Contains(b.text, "tokentap load") && !strings.Contains(b.text, "tokentap stats") {
			continue
		}
		for _, model := range []string{"sim-fast", "sim-slow"} {
			if !strings.Contains(string(out[i]), model) {
				t.Errorf("block at line %d: no row for %s in:\n%s", b.line, model, out[i])
			}
		}
	}
}

// TestReadmeCost runs the README's "Cost" section as written: tokentap on
// examples/pricing/Caddyfile, one request to the simulator, and the cost
// counter on /metrics, whose value the README shows.
func TestReadmeCost(t *testing.T) {
	if testing.Short() || os.Getenv("TOKENTAP_BINARY") == "" && os.Getenv("TOKENTAP_REQUIRE_E2E") != "1" {
		t.Skip("runs the documented commands (as root, in a network namespace): set TOKENTAP_REQUIRE_E2E=1, as .ci/run does")
	}
	path := filepath.Join(testbin.RepoRoot(t), "README.md")
	blocks, found := docReadSection(t, path, "Cost")
	if !found {
		t.Fatal("README.md has no section \"Cost\"")
	}
	newDocRun(t, path, nil).run(blocks)
}

// readmeReplayFiles are the files the README's replay section writes.
var readmeReplayFiles = []string{"/tmp/tokentap-traffic*.jsonl", "/tmp/tokentap-trace.jsonl", "/tmp/tokentap-replay.html"}

// TestReadmeReplay runs the README's "Compare models on your own traffic"
// as written: tokentap recording the simulator's route, tokentap load as
// the traffic, the recording as a mooncake trace, and its replay against
// the other model with the HTML report.
func TestReadmeReplay(t *testing.T) {
	if testing.Short() || os.Getenv("TOKENTAP_BINARY") == "" && os.Getenv("TOKENTAP_REQUIRE_E2E") != "1" {
		t.Skip("runs the documented commands (as root, in a network namespace): set TOKENTAP_REQUIRE_E2E=1, as .ci/run does")
	}
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
	path := filepath.Join(testbin.RepoRoot(t), "README.md")
	blocks, found := docReadSection(t, path, "Compare models on your own traffic")
	if !found {
		t.Fatal("README.md has no section \"Compare models on your own traffic\"")
	}
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
