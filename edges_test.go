package tokentap

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestPackageEdges holds the layering docs/ARCHITECTURE.md describes: the
// measuring, its framing, the stats, the load generator and the
// OpenTelemetry export build without Caddy, and the measuring and the
// stats without OpenTelemetry either, so that each can be used, and
// tested, on its own.
func TestPackageEdges(t *testing.T) {
	tests := []struct {
		pkg       string
		forbidden []string
	}{
		{"./internal/meter", []string{"github.com/caddyserver/", "go.opentelemetry.io/"}},
		{"./sse", []string{"github.com/caddyserver/", "go.opentelemetry.io/"}},
		{"./internal/stats", []string{"github.com/caddyserver/", "go.opentelemetry.io/"}},
		{"./internal/sink", []string{"github.com/caddyserver/", "go.opentelemetry.io/"}},
		{"./internal/framing/ndjson", []string{"github.com/caddyserver/"}},
		{"./internal/framing/jsonarray", []string{"github.com/caddyserver/"}},
		{"./internal/framing/eventstream", []string{"github.com/caddyserver/"}},
		{"./internal/capture", []string{"github.com/caddyserver/"}},
		{"./internal/loadgen", []string{"github.com/caddyserver/"}},
		{"./internal/otelexport", []string{"github.com/caddyserver/"}},
		{"./internal/exchange/injectusage", []string{"github.com/caddyserver/", "go.opentelemetry.io/"}},
		{"./internal/simulator/stamp", []string{"github.com/caddyserver/", "go.opentelemetry.io/"}},
		{"./internal/cost", []string{"github.com/caddyserver/", "go.opentelemetry.io/"}},
		{"./internal/bodytee", []string{"github.com/caddyserver/", "go.opentelemetry.io/"}},
		{"./internal/inflight", []string{"github.com/caddyserver/", "go.opentelemetry.io/"}},
		// go test ./meter stays fast: its tests link no Caddy either.
		{"-test ./internal/meter", []string{"github.com/caddyserver/"}},
	}
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.pkg, "./", ""), func(t *testing.T) {
			args := append([]string{"list", "-deps"}, strings.Fields(tt.pkg)...)
			out, err := exec.Command("go", args...).CombinedOutput()
			if err != nil {
				t.Fatalf("go list -deps %s: %v\n%s", tt.pkg, err, out)
			}
			for _, dep := range strings.Fields(string(out)) {
				for _, f := range tt.forbidden {
					if strings.HasPrefix(dep, f) {
						t.Errorf("%s depends on %s", tt.pkg, dep)
					}
				}
			}
		})
	}
}

// adapterGlue lists the production files of caddymodule that import no
// Caddy package, and why each is still the adapter's: each holds methods
// of the handler or the exchange, or the module's own configuration, that
// tie a Caddy-free package to them. Anything else that needs no Caddy
// belongs in a package of its own (docs/ARCHITECTURE.md, "Packages").
var adapterGlue = map[string]string{
	"cost.go":        "the handler's prices (its JSON config) and the exchange's pricing through package cost",
	"injectusage.go": "the exchange's use of package injectusage: its log line and the order of forwarding and measuring",
	"lease.go":       "the handler's hold on the shared providers across a Caddy reload, until its last exchange ends",
	"record.go":      "the exchange handing its Result to the handler's sinks",
	"tokenizer.go":   "the handler's tokenizer option, provisioned through package tokencount",
}

// TestAdapterFilesImportCaddy holds issue 16's rule for the adapter: every
// production file in caddymodule imports Caddy or is listed in adapterGlue,
// and every listed file still exists and still imports no Caddy, so the
// list stays true.
func TestAdapterFilesImportCaddy(t *testing.T) {
	files, err := filepath.Glob("caddymodule/*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	fset := token.NewFileSet()
	for _, path := range files {
		name := filepath.Base(path)
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		importsCaddy := slices.ContainsFunc(f.Imports, func(spec *ast.ImportSpec) bool {
			p, _ := strconv.Unquote(spec.Path.Value)
			return strings.HasPrefix(p, "github.com/caddyserver/caddy/")
		})
		_, glue := adapterGlue[name]
		seen[name] = true
		switch {
		case !importsCaddy && !glue:
			t.Errorf("caddymodule/%s imports no Caddy package: move it to a Caddy-free package, or list it in adapterGlue with the reason it is the adapter's", name)
		case importsCaddy && glue:
			t.Errorf("caddymodule/%s imports Caddy now: take it off adapterGlue", name)
		}
	}
	for name := range adapterGlue {
		if !seen[name] {
			t.Errorf("adapterGlue lists caddymodule/%s, which is gone", name)
		}
	}
}
