package testbin

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRepoRoot(t *testing.T) {
	root := RepoRoot(t)
	want, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if root != want {
		t.Errorf("RepoRoot = %s, want %s", root, want)
	}
	for _, f := range []string{"Caddyfile", "cmd/tokentap"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("the root has no %s: %v", f, err)
		}
	}
}

func TestModuleOf(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, gomod, want string
	}{
		{"plain", "module github.com/tokentap/tokentap\n\ngo 1.26\n", modulePath},
		{"quoted, after a comment", "// a nested tool\nmodule \"example.com/tool\"\n", "example.com/tool"},
		{"no module line", "go 1.26\n", ""},
		{"a longer word", "modules x\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name)
			if err := os.WriteFile(path, []byte(tc.gomod), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := moduleOf(path); got != tc.want {
				t.Errorf("moduleOf(%q) = %q, want %q", tc.gomod, got, tc.want)
			}
		})
	}
	if got := moduleOf(filepath.Join(dir, "missing")); got != "" {
		t.Errorf("a missing go.mod declares %q", got)
	}
}

func TestExecutable(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TESTBIN_EXECUTABLE", self)
	if got := Executable(t, "TESTBIN_EXECUTABLE", "TESTBIN_REQUIRE", "how"); got != self || !filepath.IsAbs(got) {
		t.Errorf("Executable = %q, want %q", got, self)
	}
	t.Setenv("TESTBIN_EXECUTABLE", "")
	t.Setenv("TESTBIN_REQUIRE", "")
	skipped := false
	t.Run("unset", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		Executable(t, "TESTBIN_EXECUTABLE", "TESTBIN_REQUIRE", "how")
	})
	if !skipped {
		t.Error("an unset variable did not skip the test")
	}
}

func TestTrace(t *testing.T) {
	a, b := NewTrace(), NewTrace()
	if a == b {
		t.Errorf("two traces with the same ids: %+v", a)
	}
	if !regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`).MatchString(a.Traceparent()) ||
		!strings.Contains(a.Traceparent(), a.ID) || !strings.Contains(a.Traceparent(), a.Parent) {
		t.Errorf("traceparent %q of %+v", a.Traceparent(), a)
	}
}

func TestEnviron(t *testing.T) {
	t.Setenv("OTEL_TESTBIN", "x")
	t.Setenv("OPENAI_TESTBIN", "y")
	t.Setenv("TESTBIN_KEPT", "z")
	env := Environ("OTEL_", "OPENAI_")
	if slices.Contains(env, "OTEL_TESTBIN=x") || slices.Contains(env, "OPENAI_TESTBIN=y") || !slices.Contains(env, "TESTBIN_KEPT=z") {
		t.Errorf("Environ(OTEL_, OPENAI_) kept the wrong variables")
	}
	if got := Environ(); len(got) != len(os.Environ()) {
		t.Errorf("Environ() dropped %d variables", len(os.Environ())-len(got))
	}
}

func TestPorts(t *testing.T) {
	addr := FreeAddr(t)
	RequireFree(t, addr)
	start := time.Now()
	WaitFree(t, 5*time.Second, addr)
	if time.Since(start) > time.Second {
		t.Errorf("WaitFree took %v on a free port", time.Since(start))
	}
}

func TestLastLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\nc", 5, "a\nb\nc"},
		{"", 3, ""},
	} {
		if got := LastLines(tc.in, tc.n); got != tc.want {
			t.Errorf("LastLines(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
