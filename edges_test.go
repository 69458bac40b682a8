package tokentap

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/tokentap/tokentap/"

// edge is one rule of the layering docs/ARCHITECTURE.md draws: no package
// matched by pkgs may depend, directly or not, on a package starting with
// any of forbidden, so that each can be built, used and tested without
// what it forbids.
type edge struct {
	name      string
	pkgs      func(path string) bool
	forbidden []string
	// tests applies the rule to the packages' tests too, so that their
	// go test stays fast to build.
	tests bool
}

var (
	caddy = "github.com/caddyserver/"
	otel  = "go.opentelemetry.io/"
)

func under(prefixes ...string) func(string) bool {
	return func(path string) bool {
		for _, p := range prefixes {
			if path == module+p || strings.HasPrefix(path, module+p+"/") {
				return true
			}
		}
		return false
	}
}

// caddyModules are the packages under internal/ that are Caddy modules by
// design: the simulator is the tokentap_simulator handler, for tests and
// benchmarks.
var caddyModules = []string{"internal/simulator"}

// TestPackageEdges holds the layering: the library packages reach no Caddy
// (caddymodule is the only door to it), one exchange is plain net/http
// middleware, the measuring and its framing and the stats need no
// OpenTelemetry either, the framing knows no LLM API, and the sink
// contract knows none of its sinks.
func TestPackageEdges(t *testing.T) {
	rules := []edge{
		{
			name: "the library packages reach no Caddy",
			pkgs: func(p string) bool {
				return under("internal", "sse")(p) && !under(caddyModules...)(p)
			},
			forbidden: []string{caddy},
		},
		{
			name:      "one exchange is net/http middleware, tests included",
			pkgs:      under("internal/exchange"),
			forbidden: []string{caddy, module + "caddymodule"},
			tests:     true,
		},
		{
			name:      "the measuring, the framing and the stats need no OpenTelemetry",
			pkgs:      under("sse", "internal/framing", "internal/meter", "internal/stats", "internal/live", "internal/drift", "internal/protofields", "internal/sink", "internal/cost", "internal/slo", "internal/capture", "internal/exchange/injectusage", "internal/simulator/stamp", "internal/ratelimit"),
			forbidden: []string{otel},
		},
		{
			name:      "the framing knows no LLM API",
			pkgs:      under("sse", "internal/framing"),
			forbidden: []string{module},
		},
		{
			name:      "the sink contract knows none of its sinks",
			pkgs:      under("internal/sink"),
			forbidden: []string{module + "internal/stats", module + "internal/otelexport", module + "internal/recording", module + "internal/exchange", module + "caddymodule"},
		},
		{
			name:      "go test ./internal/meter links no Caddy",
			pkgs:      under("internal/meter"),
			forbidden: []string{caddy},
			tests:     true,
		},
	}
	for _, rule := range rules {
		t.Run(rule.name, func(t *testing.T) {
			pkgs := listDeps(t, rule.tests)
			matched := 0
			for _, p := range pkgs {
				// A test variant is "path [path.test]", an external test
				// package "path_test [path.test]".
				path := strings.Fields(p.ImportPath)[0]
				isTest := p.ForTest != "" || strings.HasSuffix(path, "_test")
				if isTest && !rule.tests {
					continue
				}
				if !rule.pkgs(strings.TrimSuffix(path, "_test")) {
					continue
				}
				matched++
				for _, dep := range p.Deps {
					for _, f := range rule.forbidden {
						if strings.HasPrefix(dep, f) {
							t.Errorf("%s depends on %s", p.ImportPath, dep)
						}
					}
				}
			}
			if matched == 0 {
				t.Error("no package matched: the rule guards nothing")
			}
		})
	}
}

// pkg is what go list says of a package.
type pkg struct {
	ImportPath string
	ForTest    string
	Deps       []string
}

// listDeps lists the module's packages with their dependencies, and their
// test variants when tests is set.
func listDeps(t *testing.T, tests bool) []pkg {
	t.Helper()
	args := []string{"list", "-json=ImportPath,ForTest,Deps"}
	if tests {
		args = append(args, "-test")
	}
	out, err := exec.Command("go", append(args, "./...")...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		// A package's test binary (pkg.test) is not the package.
		if strings.HasSuffix(p.ImportPath, ".test") {
			continue
		}
		pkgs = append(pkgs, p)
	}
	return slices.Clip(pkgs)
}
