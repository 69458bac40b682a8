package e2e

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// fuzzTarget is one fuzz target and what it covers: the dialects it feeds
// and the decoder or reader it exercises. docs/RELIABILITY.md lists the
// same table.
type fuzzTarget struct {
	pkg, name string
	dialects  []string
	decoder   string
}

var fuzzTargets = []fuzzTarget{
	{pkg: "sse", name: "FuzzDecoder", decoder: "text/event-stream"},
	{pkg: "internal/framing/ndjson", name: "FuzzDecoder", decoder: "newline-delimited JSON"},
	{pkg: "internal/framing/jsonarray", name: "FuzzDecoder", decoder: "streamed JSON array"},
	{pkg: "internal/framing/eventstream", name: "FuzzDecoder", decoder: "AWS event stream"},
	{pkg: "internal/meter", name: "FuzzJSONRaw", decoder: "the dialects' raw JSON reader"},
	{pkg: "internal/meter", name: "FuzzDecompressingTap", decoder: "gzip, deflate, br, zstd side copy"},
	{pkg: "internal/meter", name: "FuzzOpenAIChat", dialects: []string{"openai_chat"}},
	{pkg: "internal/meter", name: "FuzzOpenAIResponses", dialects: []string{"openai_responses"}},
	{pkg: "internal/meter", name: "FuzzAnthropicMessages", dialects: []string{"anthropic_messages"}},
	{pkg: "internal/meter", name: "FuzzGemini", dialects: []string{"gemini"}},
	{pkg: "internal/meter", name: "FuzzOllama", dialects: []string{"ollama"}},
	{pkg: "internal/meter", name: "FuzzCohere", dialects: []string{"cohere_chat"}},
	{pkg: "internal/meter", name: "FuzzTGI", dialects: []string{"tgi"}},
	{pkg: "internal/meter", name: "FuzzBedrock", dialects: []string{"bedrock_converse", "bedrock_invoke"}},
	{pkg: "internal/simulator", name: "FuzzPlanTarget", decoder: "the simulator's request planning"},
	{pkg: "internal/meter", name: "FuzzTextSink", decoder: "the streamed text handed to capture_content, every dialect"},
	{pkg: "internal/capture", name: "FuzzInput", decoder: "capture_content's reading of request bodies, every dialect"},
	{pkg: "sse", name: "FuzzSplitter", decoder: "inject_usage's event boundaries (sse.Splitter)"},
	{pkg: "internal/exchange/injectusage", name: "FuzzStripper", decoder: "inject_usage's removal of the usage it asked for"},
	{pkg: "internal/cost", name: "FuzzLoadLiteLLM", decoder: "pricing files in LiteLLM's format"},
	{pkg: "internal/stats", name: "FuzzSnapshot", decoder: "other instances' sketches (tokentap stats --from)"},
	{pkg: "internal/drift", name: "FuzzObserve", decoder: "the slowdown detector's per-request values"},
	{pkg: "internal/recording", name: "FuzzRead", decoder: "recordings and mooncake traces (tokentap load --replay)"},
	{pkg: "internal/loadgen", name: "FuzzRead", decoder: "tokentap load's reading of SSE streams, held to sse.Decoder"},
	{pkg: "internal/ratelimit", name: "FuzzRead", decoder: "providers' rate limit response headers"},
	{pkg: "internal/stats", name: "FuzzHistory", decoder: "the live stats' history restored at start (tokentap_history)"},
	{pkg: "internal/drift", name: "FuzzDetectorState", decoder: "a slowdown detector's state in the history"},
}

// TestFuzzCoverage: every registered dialect and every streaming decoder
// has a fuzz target, and every fuzz target in the repository is in the
// table above (and so in docs/RELIABILITY.md). With TOKENTAP_REQUIRE_E2E=1
// (.ci/reliability) it also runs each target's committed seed corpus (f.Add
// seeds from testdata fixtures, or testdata/fuzz files) and requires at
// least a few inputs; that compiles every package's tests once more, which
// `go test ./...` need not pay for. CI fuzzes each target for a bounded
// time (.ci/run).
func TestFuzzCoverage(t *testing.T) {
	root := testbin.RepoRoot(t)

	covered := map[string]string{}
	for _, ft := range fuzzTargets {
		for _, d := range ft.dialects {
			covered[d] = ft.pkg + "." + ft.name
		}
	}
	for _, d := range meter.DialectNames() {
		if covered[d] == "" {
			t.Errorf("dialect %s has no fuzz target: add one to meter and to fuzzTargets", d)
		}
		delete(covered, d)
	}
	for d, ft := range covered {
		t.Errorf("fuzzTargets names dialect %s (%s), which is not registered", d, ft)
	}

	// Every fuzz target and every Decoder type in the repository.
	declared := map[string]bool{}
	decoders := map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "tools" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg, _ := filepath.Rel(root, filepath.Dir(path))
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if strings.HasSuffix(path, "_test.go") && decl.Recv == nil && strings.HasPrefix(decl.Name.Name, "Fuzz") {
					declared[pkg+"."+decl.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok && ts.Name.Name == "Decoder" && !strings.HasSuffix(path, "_test.go") {
						decoders[pkg] = true
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, ft := range fuzzTargets {
		listed[ft.pkg+"."+ft.name] = true
		if !declared[ft.pkg+"."+ft.name] {
			t.Errorf("fuzzTargets lists %s.%s, which does not exist", ft.pkg, ft.name)
		}
	}
	for name := range declared {
		if !listed[name] {
			t.Errorf("fuzz target %s is not in fuzzTargets (nor, then, in docs/RELIABILITY.md)", name)
		}
	}
	for pkg := range decoders {
		if !listed[pkg+".FuzzDecoder"] {
			t.Errorf("package %s has a Decoder and no FuzzDecoder", pkg)
		}
	}

	if os.Getenv("TOKENTAP_REQUIRE_E2E") != "1" {
		t.Log("set TOKENTAP_REQUIRE_E2E=1 to also run and count the seed corpora")
		return
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to run the seed corpora: %v", err)
	}
	// Run each package's targets on their seed corpora and count the
	// inputs each ran.
	byPkg := map[string][]string{}
	for _, ft := range fuzzTargets {
		byPkg[ft.pkg] = append(byPkg[ft.pkg], ft.name)
	}
	pkgs := make([]string, 0, len(byPkg))
	for p := range byPkg {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	seedLine := regexp.MustCompile(`^=== RUN   (Fuzz\w+)/`)
	for _, pkg := range pkgs {
		names := byPkg[pkg]
		cmd := exec.Command(goTool, "test", "-count=1", "-v", "-run", "^("+strings.Join(names, "|")+")$", "./"+pkg)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("seed corpora of %s: %v\n%s", pkg, err, testbin.LastLines(string(out), 30))
			continue
		}
		seeds := map[string]int{}
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if m := seedLine.FindStringSubmatch(sc.Text()); m != nil {
				seeds[m[1]]++
			}
		}
		for _, name := range names {
			if seeds[name] < 3 {
				t.Errorf("%s.%s ran %d seed inputs; commit a seed corpus (f.Add from testdata, or testdata/fuzz/%s)", pkg, name, seeds[name], name)
			}
			t.Logf("%s.%s: %d seed inputs", pkg, name, seeds[name])
		}
	}
}
