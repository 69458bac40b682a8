package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// TestCommandsNameThemselves: every command's usage line says tokentap,
// the name a user typed, not Caddy's.
func TestCommandsNameThemselves(t *testing.T) {
	bin := testbin.Binary(t)
	tests := []struct{ name, command string }{
		{"tokentap's load generator", "load"},
		{"tokentap's live stats", "stats"},
		{"Caddy's run", "run"},
		{"Caddy's adapt", "adapt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := exec.Command(bin, tt.command, "--help").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --help: %v\n%s", tt.command, err, out)
			}
			want := "Usage:\n  tokentap " + tt.command
			if !strings.Contains(string(out), want) {
				t.Errorf("%s --help has no %q:\n%s", tt.command, want, out)
			}
		})
	}
}

// TestShippedCaddyfilesAdaptCleanly: the default Caddyfile and the
// examples' adapt without a warning, so that a user's first start logs
// none (Caddy warns of a header_up Host that an HTTPS upstream gets by
// itself).
func TestShippedCaddyfilesAdaptCleanly(t *testing.T) {
	bin := testbin.Binary(t)
	root := testbin.RepoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "examples", "*", "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join(root, "Caddyfile")}, files...)
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		t.Run(rel, func(t *testing.T) {
			cmd := exec.Command(bin, "adapt", "--config", f)
			cmd.Dir = filepath.Dir(f)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("adapt: %v\n%s", err, stderr.String())
			}
			for _, line := range strings.Split(stderr.String(), "\n") {
				if strings.Contains(line, `"level":"warn"`) || strings.Contains(line, `"level":"error"`) {
					t.Errorf("adapting logs: %s", line)
				}
			}
		})
	}
}

// TestOnlyOfferedVocabulariesLinked: the binary holds the two tokenizer
// vocabularies tokentap offers (o200k_base, cl100k_base) and not the
// others, which tokenizer.Get would link (docs/BENCHMARKS.md, "Binary
// size").
func TestOnlyOfferedVocabulariesLinked(t *testing.T) {
	out, err := exec.Command("go", "tool", "nm", testbin.Binary(t)).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	syms := string(out)
	for _, v := range []struct {
		symbol string
		want   bool
	}{
		{"codec.o200kBaseVocabInit", true},
		{"codec.cl100kBaseVocabInit", true},
		{"codec.r50kBaseVocabInit", false},
		{"codec.p50kBaseVocabInit", false},
	} {
		if got := strings.Contains(syms, v.symbol); got != v.want {
			t.Errorf("%s linked: %v, want %v", v.symbol, got, v.want)
		}
	}
}
