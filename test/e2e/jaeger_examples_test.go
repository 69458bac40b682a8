//go:build linux

package e2e

import (
	"path/filepath"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// TestJaegerExampleReadme runs the commands of examples/jaeger/README.md as
// written: run.sh (building Jaeger and tokentap as a reader's first run
// does, from Go's build cache here), a request in each format, and the
// queries, whose documented answers are checked against the real ones.
func TestJaegerExampleReadme(t *testing.T) {
	jaegerBinary(t) // built, so that run.sh finds it in Go's build cache
	path := filepath.Join(testbin.RepoRoot(t), "examples", "jaeger", "README.md")
	blocks, _ := docReadSection(t, path, "")
	newDocRun(t, path, nil).run(blocks)
}
