package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// clientsNodeTimeout bounds the node test run: two completions each way.
const clientsNodeTimeout = 2 * time.Minute

// clientsNodeRecord is one line of the node script's report: a request it
// made through tokentap and what the openai package gave it.
type clientsNodeRecord struct {
	Name          string   `json:"name"`
	TraceID       string   `json:"traceId"`
	ID            string   `json:"id"`
	Model         string   `json:"model"`
	Text          string   `json:"text"`
	FinishReasons []string `json:"finishReasons"`
	Usage         struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

// TestClientsNode runs test/e2e/node/chat.test.mjs (node:test, the openai npm
// package at the version test/e2e/node/package.json pins) against the built
// tokentap and its simulator: the script checks that the SDK gets the same
// completions through tokentap as directly, and this test that each span
// counts the tokens the SDK reported. npm ci in test/e2e/node installs the
// package (.ci/e2e-clients does).
func TestClientsNode(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testbin.Missing(t, testbin.RequireE2E, "node is not installed: %v", err)
	}
	dir := filepath.Join(testbin.RepoRoot(t), "test", "e2e", "node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		testbin.Missing(t, testbin.RequireE2E, "the openai npm package is not installed in %s (run npm ci there): %v", dir, err)
	}
	tok := startClientsTokentap(t, clientsCaddyfile, clientsProxyURL+"/", clientsSimulatorURL+"/")

	report := filepath.Join(t.TempDir(), "report.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), clientsNodeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "chat.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(clientsEnv(),
		"TOKENTAP_URL="+clientsProxyURL+"/sim/v1",
		"SIMULATOR_URL="+clientsSimulatorURL+"/v1",
		"TOKENTAP_NODE_REPORT="+report,
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("node --test chat.test.mjs:\n%s", out.Bytes())
	if err != nil {
		t.Fatalf("the node tests failed: %v", err)
	}

	f, err := os.Open(report)
	if err != nil {
		t.Fatalf("the node script wrote no report: %v", err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec clientsNodeRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("report line %q: %v", sc.Bytes(), err)
		}
		seen[rec.Name] = true
		t.Run(rec.Name, func(t *testing.T) {
			streamed := rec.Name == "streamed"
			span := tok.span(t, testbin.Trace{ID: rec.TraceID})
			wants := []clientsWant{
				{"gen_ai.operation.name", "chat"},
				{"gen_ai.request.model", "gpt-4o-mini"},
				{"gen_ai.response.model", rec.Model},
				{"gen_ai.response.id", rec.ID},
				{"gen_ai.response.finish_reasons", clientsAnySlice(rec.FinishReasons)},
				{"gen_ai.usage.input_tokens", rec.Usage.PromptTokens},
				{"gen_ai.usage.output_tokens", rec.Usage.CompletionTokens},
				{"tokentap.usage.source", "reported"},
			}
			checkClientsSpan(t, span, streamed, wants)
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"non-streamed", "streamed"} {
		if !seen[name] {
			t.Errorf("the node script reported no %q request", name)
		}
	}
}
