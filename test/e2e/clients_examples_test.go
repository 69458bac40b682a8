package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/testutil/otlpsink"
	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// clientsExampleTimeout bounds one README block; `go run` may compile an
// SDK first.
const clientsExampleTimeout = 5 * time.Minute

// clientsCaddyfilePorts moves the repository's Caddyfile to this test's
// ports, on loopback only. Each edit must apply exactly once, so that a
// change of the Caddyfile's shape fails here rather than leaving the test on
// the default ports, where a user's tokentap may be running.
var clientsCaddyfilePorts = []struct{ old, new string }{
	{"admin localhost:2019", "admin localhost:" + clientsAdminPort + "\n\tdefault_bind 127.0.0.1"},
	{"\n:8080 {", "\n:" + clientsProxyPort + " {"},
	{"reverse_proxy 127.0.0.1:8081", "reverse_proxy 127.0.0.1:" + clientsSimulatorPort},
	{"http://:8081 {", "http://:" + clientsSimulatorPort + " {"},
}

// clientsExampleAddr is the address the examples are written for (the
// repository Caddyfile's :8080) and the one this test runs them against.
const (
	clientsExampleAddr = "localhost:8080"
	clientsTestAddr    = "127.0.0.1:" + clientsProxyPort
)

// TestClientsExamples runs every sh block of examples/clients/README.md
// (curl, the Go SDKs, the openai npm package) against the built binary on
// the repository's own Caddyfile, moved to this test's ports, and checks
// that each request a block made was measured: for every usage a client
// printed there is a span with those counts, and no span without one. The
// Python blocks are not run (PyPI cannot be reached here); the Python files
// are parsed instead.
func TestClientsExamples(t *testing.T) {
	root := testbin.RepoRoot(t)
	readme := filepath.Join(root, "examples", "clients", "README.md")
	blocks := clientsShellBlocks(t, readme)
	if len(blocks) < 6 {
		t.Fatalf("%s has %d sh blocks; the curl, Go, Node and Python examples make at least 6", readme, len(blocks))
	}
	caddyfile, err := os.ReadFile(filepath.Join(root, "Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	config := string(caddyfile)
	for _, e := range clientsCaddyfilePorts {
		if n := strings.Count(config, e.old); n != 1 {
			t.Fatalf("the repository's Caddyfile has %q %d times, want once: update clientsCaddyfilePorts", e.old, n)
		}
		config = strings.Replace(config, e.old, e.new, 1)
	}
	tok := startClientsTokentap(t, config, clientsProxyURL+"/", clientsSimulatorURL+"/")

	claimed := map[string]bool{}
	ran := 0
	for i, block := range blocks {
		name := fmt.Sprintf("block %d: %s", i+1, clientsShorten(strings.TrimSuffix(strings.SplitN(block, "\n", 2)[0], " \\"), 60))
		t.Run(name, func(t *testing.T) {
			if clientsMentions(block, "python", "pip") {
				t.Skip("Python examples are not run: PyPI cannot be reached from this project's machines (see the README)")
			}
			for _, tool := range []string{"curl", "go", "node", "npm"} {
				if clientsMentions(block, tool) {
					if _, err := exec.LookPath(tool); err != nil {
						testbin.Missing(t, testbin.RequireE2E, "%s is not installed: %v", tool, err)
					}
				}
			}
			if !strings.Contains(block, clientsExampleAddr) {
				t.Fatalf("the block does not use %s, the repository Caddyfile's address:\n%s", clientsExampleAddr, block)
			}
			script := strings.ReplaceAll(block, clientsExampleAddr, clientsTestAddr)
			ctx, cancel := context.WithTimeout(context.Background(), clientsExampleTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
			cmd.Dir = root
			cmd.Env = clientsEnv()
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			t.Logf("$ %s\n%s", script, clientsShorten(stdout.String(), 2000))
			if err != nil {
				t.Fatalf("the block failed: %v\nstderr:\n%s", err, stderr.Bytes())
			}
			usages := clientsPrintedUsages(t, stdout.Bytes())
			if len(usages) == 0 {
				t.Fatalf("the block printed no token usage to compare with tokentap's span")
			}
			for _, u := range usages {
				span := clientsClaimSpan(t, tok.sink, claimed, u)
				if span.Attributes["tokentap.outcome"] != "completed" {
					t.Errorf("span %s: outcome %v, want completed", span, span.Attributes["tokentap.outcome"])
				}
			}
			ran++
		})
	}
	if ran < 5 {
		t.Errorf("%d blocks ran; the curl, Go and Node examples are 5", ran)
	}
	// Every span was claimed by a printed usage: no request was measured
	// that a client did not see complete. Spans leave in batches, so wait
	// out one export delay first.
	time.Sleep(500 * time.Millisecond)
	if spans := tok.sink.Spans(); len(spans) != len(claimed) {
		t.Errorf("tokentap exported %d spans for the %d requests the examples printed usage for", len(spans), len(claimed))
	}

	for _, py := range []string{"openai_chat.py", "anthropic_messages.py"} {
		clientsParsePython(t, filepath.Join(root, "examples", "clients", "python", py))
	}
}

// clientsShellBlocks returns the ```sh blocks of a Markdown file.
func clientsShellBlocks(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && strings.TrimSpace(line) == "```sh":
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, line)
		}
	}
	if in {
		t.Fatalf("%s: an sh block is not closed", path)
	}
	return blocks
}

// clientsMentions reports whether the shell script runs any of the commands:
// one of them as a word, at the start of a line or after an environment
// assignment.
func clientsMentions(script string, commands ...string) bool {
	for _, c := range commands {
		if regexp.MustCompile(`(^|\n|\s)` + regexp.QuoteMeta(c) + `\s`).MatchString(script) {
			return true
		}
	}
	return false
}

// clientsShorten cuts s to about max bytes for a log, keeping its start and
// its end (where the usage is).
func clientsShorten(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return s[:max/2] + " […] " + s[len(s)-max/2:]
}

// clientsUsage is a token count a client printed.
type clientsUsage struct{ input, output int64 }

var clientsUsageLine = regexp.MustCompile(`(?m)^usage: input_tokens=(\d+) output_tokens=(\d+)$`)

// clientsPrintedUsages finds the token usage in what a block printed: the
// examples' "usage: input_tokens=N output_tokens=M" lines, the usage chunk
// of an OpenAI-style stream, or the usage of a whole JSON body.
func clientsPrintedUsages(t *testing.T, out []byte) []clientsUsage {
	t.Helper()
	var usages []clientsUsage
	for _, m := range clientsUsageLine.FindAllSubmatch(out, -1) {
		in, _ := strconv.ParseInt(string(m[1]), 10, 64)
		o, _ := strconv.ParseInt(string(m[2]), 10, 64)
		usages = append(usages, clientsUsage{in, o})
	}
	fromJSON := func(data []byte) {
		var body struct {
			Usage *struct {
				PromptTokens     *int64 `json:"prompt_tokens"`
				CompletionTokens *int64 `json:"completion_tokens"`
				InputTokens      *int64 `json:"input_tokens"`
				OutputTokens     *int64 `json:"output_tokens"`
			} `json:"usage"`
		}
		if json.Unmarshal(data, &body) != nil || body.Usage == nil {
			return
		}
		switch u := body.Usage; {
		case u.PromptTokens != nil && u.CompletionTokens != nil:
			usages = append(usages, clientsUsage{*u.PromptTokens, *u.CompletionTokens})
		case u.InputTokens != nil && u.OutputTokens != nil:
			usages = append(usages, clientsUsage{*u.InputTokens, *u.OutputTokens})
		}
	}
	trimmed := bytes.TrimSpace(out)
	if bytes.HasPrefix(trimmed, []byte("{")) {
		fromJSON(trimmed)
	}
	for _, line := range bytes.Split(out, []byte("\n")) {
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			fromJSON(data)
		}
	}
	return usages
}

// clientsClaimSpan waits for a span not claimed yet whose input and output
// token counts are u's, and claims it.
func clientsClaimSpan(t *testing.T, sink *otlpsink.Sink, claimed map[string]bool, u clientsUsage) otlpsink.Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clientsSpanTimeout)
	defer cancel()
	span, err := sink.WaitFor(ctx, func(s otlpsink.Span) bool {
		return !claimed[s.SpanID] &&
			s.Attributes["gen_ai.usage.input_tokens"] == u.input &&
			s.Attributes["gen_ai.usage.output_tokens"] == u.output
	})
	if err != nil {
		t.Fatalf("no span counts the %d input and %d output tokens the client printed: %v", u.input, u.output, err)
	}
	claimed[span.SpanID] = true
	t.Logf("span %s: %d input and %d output tokens (%v), as the client printed", span.Name, u.input, u.output, span.Attributes["tokentap.usage.source"])
	return span
}

// clientsParsePython checks that a Python example parses, without running
// it or writing bytecode next to it.
func clientsParsePython(t *testing.T, path string) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		testbin.Missing(t, testbin.RequireE2E, "python3 is not installed, so %s cannot be parsed: %v", path, err)
	}
	out, err := exec.Command(python, "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])", path).CombinedOutput()
	if err != nil {
		t.Errorf("%s does not parse: %v\n%s", path, err, out)
	}
}
