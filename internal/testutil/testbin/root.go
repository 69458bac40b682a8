package testbin

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// modulePath is the module whose root RepoRoot looks for.
const modulePath = "github.com/tokentap/tokentap"

// RepoRoot is the repository root: the nearest directory at or above the
// test's working directory (its package's directory) whose go.mod declares
// tokentap's module. Nested modules (test/tools/jaeger, test/tools/otelcol) are
// passed over, so the answer is the same from any package.
func RepoRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for dir := wd; ; {
		if moduleOf(filepath.Join(dir, "go.mod")) == modulePath {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no directory at or above %s has the go.mod of %s", wd, modulePath)
		}
		dir = parent
	}
}

// moduleOf is the module path a go.mod declares, or "" when the file is
// missing or declares none.
func moduleOf(gomod string) string {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return ""
	}
	for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
