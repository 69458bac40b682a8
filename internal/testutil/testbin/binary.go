package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// RequireE2E is the environment variable that, set to 1 (as the .ci/
// scripts set it), turns a missing prerequisite of an end-to-end test (a
// binary, a tool) into a failure: without it the test is skipped, and CI
// would pass without having run it.
const RequireE2E = "TOKENTAP_REQUIRE_E2E"

// howToBuild is how to get the binary Binary wants.
const howToBuild = "build it with `go build -o /tmp/tokentap ./cmd/tokentap` and set TOKENTAP_BINARY to its path " +
	"(the .ci/ scripts that run these tests do)"

// Missing skips the test for a missing prerequisite, or fails it when the
// environment variable require is 1.
func Missing(t testing.TB, require, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(require) == "1" {
		t.Fatalf("%s=1: %s", require, msg)
	}
	t.Skipf("%s (%s=1 makes this a failure)", msg, require)
}

// Executable is the absolute path of the executable file the environment
// variable env names. When env is unset the test is skipped, or failed
// when require is 1 (see Missing), with how to get the file; a path that
// is not an executable file always fails it.
func Executable(t testing.TB, env, require, how string) string {
	t.Helper()
	path := os.Getenv(env)
	if path == "" {
		Missing(t, require, "%s is not set; %s", env, how)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(abs); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s=%s is not an executable file (stat error: %v)", env, path, err)
	}
	return abs
}

// Binary is the tokentap binary under test, from TOKENTAP_BINARY: the
// tests that need it skip without it (fail under TOKENTAP_REQUIRE_E2E=1),
// since building it would cost every `go test ./...` a link.
func Binary(t testing.TB) string {
	t.Helper()
	return Executable(t, "TOKENTAP_BINARY", RequireE2E, howToBuild)
}

// built is the binary Build made, once per test process.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Build is the tokentap binary for a test that must always run: the one
// TOKENTAP_BINARY names, or else ./cmd/tokentap built once per test process
// (the first call builds it; call RemoveBuilt from TestMain to delete it).
func Build(t testing.TB) string {
	t.Helper()
	if os.Getenv("TOKENTAP_BINARY") != "" {
		return Binary(t)
	}
	root := RepoRoot(t)
	built.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			built.err = fmt.Errorf("building the binary needs the go command: %v", err)
			return
		}
		built.dir, built.err = os.MkdirTemp("", "tokentap-testbin-")
		if built.err != nil {
			return
		}
		bin := filepath.Join(built.dir, "tokentap")
		cmd := exec.Command(goTool, "build", "-o", bin, "./cmd/tokentap")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("building the binary: %v\n%s", err, out)
			return
		}
		built.path = bin
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// RemoveBuilt deletes the binary Build made, if it made one. TestMain
// calls it after the tests ran, when no test uses the binary any more.
func RemoveBuilt() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}
