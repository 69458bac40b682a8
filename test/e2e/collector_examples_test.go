//go:build linux

package e2e

import (
	"path/filepath"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// TestCollectorExampleReadme runs the commands of examples/collector/README.md
// as written: run.sh (Jaeger, the Collector and tokentap built as a
// reader's first run does, from Go's build cache here), four requests to
// the load balancer, and the queries to Jaeger and to the Prometheus
// endpoint, whose documented answers are checked against the real ones.
func TestCollectorExampleReadme(t *testing.T) {
	// Built, so that run.sh finds them in Go's build cache.
	jaegerBinary(t)
	otelcolBinary(t)
	path := filepath.Join(testbin.RepoRoot(t), "examples", "collector", "README.md")
	blocks, _ := docReadSection(t, path, "")
	newDocRun(t, path, nil).run(blocks)
}
