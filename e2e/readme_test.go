package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentap/tokentap/internal/testbin"
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
