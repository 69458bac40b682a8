package tokentap

import (
	"os"
	"strings"
	"testing"
)

// The README is the first page a newcomer reads: short enough to read
// whole, with the way to a result near the top. Reference material lives
// in docs/, and a README that grows past these bounds has taken some back.
const (
	readmeMaxLines        = 250
	readmeQuickStartBy    = 60
	readmeQuickStartTitle = "## Quick start"
)

// readmeQuickStartCommands are the quick start's three steps: start
// tokentap on the default Caddyfile, send traffic, compare the models.
// test/e2e's TestReadmeQuickStart runs them; this test only keeps them
// in the section, where a reader finds them without the e2e suite.
var readmeQuickStartCommands = []string{
	"go run ./cmd/tokentap run",
	"go run ./cmd/tokentap load",
	"go run ./cmd/tokentap stats",
}

// TestReadmeShape holds the README to its shape: at most readmeMaxLines
// lines, the quick start's heading within the first readmeQuickStartBy,
// and the section holding its three commands.
func TestReadmeShape(t *testing.T) {
	src, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(src), "\n"), "\n")
	if len(lines) > readmeMaxLines {
		t.Errorf("README.md has %d lines, want at most %d: move reference material to docs/ and link it", len(lines), readmeMaxLines)
	}
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == readmeQuickStartTitle {
			start = i
			break
		}
	}
	if start < 0 {
		t.Fatalf("README.md has no %q heading", readmeQuickStartTitle)
	}
	if start+1 > readmeQuickStartBy {
		t.Errorf("README.md's %q is on line %d, want it within the first %d", readmeQuickStartTitle, start+1, readmeQuickStartBy)
	}
	end := len(lines)
	for i := start + 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "## ") || strings.HasPrefix(lines[i], "# ") {
			end = i
			break
		}
	}
	section := strings.Join(lines[start:end], "\n")
	for _, cmd := range readmeQuickStartCommands {
		if !strings.Contains(section, cmd) {
			t.Errorf("README.md's quick start (lines %d-%d) does not hold %q", start+1, end, cmd)
		}
	}
}
