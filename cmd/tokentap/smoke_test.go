package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/testutil/otlpsink"
	"github.com/tokentap/tokentap/internal/testutil/testbin"
	"github.com/tokentap/tokentap/sse"
)

// The smoke test runs the real binary with the repository's default
// Caddyfile, drives it with the real curl, and reads the spans it exports
// over real OTLP/gRPC: the path a user takes, end to end, which no unit test
// of the handler covers (config adaptation, module registration, env-driven
// exporter setup, flushing on shutdown).
//
// The addresses are fixed by the Caddyfile, not chosen by the test: the test
// checks the shipped configuration, so it cannot rewrite it.
const (
	proxyURL     = "http://127.0.0.1:8080"
	simulatorURL = "http://127.0.0.1:8081"
	adminURL     = "http://localhost:2019/config/"

	smokeService = "tokentap-smoke"
	smokeModel   = "sim-fast"

	startupTimeout = 30 * time.Second
	spanTimeout    = 15 * time.Second
	curlTimeout    = 30 * time.Second
	stopTimeout    = 5 * time.Second
)

// smokeListenAddrs are what the default Caddyfile binds: :8080 on every
// interface, the simulator on loopback only, and the admin API on localhost.
var smokeListenAddrs = []string{":8080", "127.0.0.1:8081", "127.0.0.1:2019"}

const (
	streamRequest    = `{"model":"sim-fast","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"smoke test"}]}`
	nonStreamRequest = `{"model":"sim-fast","stream":false,"messages":[{"role":"user","content":"smoke test"}]}`
)

func TestSmoke(t *testing.T) {
	bin := testbin.Binary(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("the smoke test drives tokentap with the real curl, which is not installed: %v", err)
	}
	root := testbin.RepoRoot(t)
	// The ports are the Caddyfile's: taken, tokentap would exit with a
	// bind error, or worse, the test would talk to another process.
	testbin.RequireFree(t, smokeListenAddrs...)

	sink, err := otlpsink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the process's cleanup, so it runs after it: the
	// spans flushed at shutdown still find the sink listening.
	t.Cleanup(sink.Close)

	proc := testbin.Start(t, testbin.Config{
		Bin:        bin,
		ConfigFile: filepath.Join(root, "Caddyfile"),
		Dir:        root,
		Env: append(testbin.Environ("OTEL_"),
			"OTEL_EXPORTER_OTLP_ENDPOINT="+sink.Endpoint(),
			"OTEL_EXPORTER_OTLP_INSECURE=true",
			"OTEL_BSP_SCHEDULE_DELAY=200", // ms: spans reach the sink quickly
			"OTEL_SERVICE_NAME="+smokeService,
		),
		StopTimeout: stopTimeout,
		AfterStop: func(out string) {
			if t.Failed() {
				t.Logf("tokentap output:\n%s", out)
			}
		},
	})
	proc.WaitReady(t, startupTimeout, proxyURL+"/", simulatorURL+"/", adminURL)

	spans := &spanClaims{sink: sink}

	t.Run("streaming", func(t *testing.T) {
		viaProxy := curlOK(t, proxyURL+"/sim/v1/chat/completions", streamRequest)
		// Claimed at once, before any check can end this subtest, so that
		// a later subtest never takes this request's span for its own.
		span := spans.next(t)
		direct := curlOK(t, simulatorURL+"/v1/chat/completions", streamRequest)

		for name, out := range map[string][]byte{"proxied": viaProxy, "direct": direct} {
			if len(out) == 0 {
				t.Fatalf("%s response is empty", name)
			}
			if !bytes.HasPrefix(out, []byte("data: ")) || !bytes.HasSuffix(out, []byte("data: [DONE]\n\n")) {
				t.Errorf("%s response is not an SSE stream ending in [DONE]:\n%s", name, out)
			}
		}
		if hp, hd := sha256.Sum256(viaProxy), sha256.Sum256(direct); hp != hd {
			t.Errorf("the proxied stream differs from the direct one (sha256 %x vs %x): tokentap must be transparent\nproxied:\n%s\ndirect:\n%s",
				hp, hd, viaProxy, direct)
		}

		st := parseStream(t, viaProxy)
		if st.contentChunks == 0 || st.usage == nil {
			t.Fatalf("the simulator's stream has %d content chunks and usage %v; want both", st.contentChunks, st.usage)
		}
		if st.usage.CompletionTokens != st.contentChunks {
			t.Errorf("the simulator reported %d completion tokens for %d content chunks", st.usage.CompletionTokens, st.contentChunks)
		}

		checkSpan(t, span, "client", false, []attrCheck{
			{"gen_ai.operation.name", "chat"},
			{"gen_ai.provider.name", "openai"},
			{"gen_ai.request.model", smokeModel},
			{"gen_ai.request.stream", true},
			{"gen_ai.response.model", st.model},
			{"gen_ai.response.id", st.id},
			{"gen_ai.response.finish_reasons", st.finishReasons},
			{"gen_ai.usage.input_tokens", int64(st.usage.PromptTokens)},
			// The count of chunks curl received is the ground truth
			// the reported usage must agree with.
			{"gen_ai.usage.output_tokens", int64(st.contentChunks)},
			{"server.address", "127.0.0.1"},
			{"server.port", int64(8081)},
			{"http.response.status_code", int64(200)},
			{"tokentap.outcome", "completed"},
			{"tokentap.usage.source", "reported"},
			// sim-fast's first token is due 100ms after the request.
			{"tokentap.time_to_first_token", floatIn(0.05, 2)},
			{"tokentap.output_tokens_per_second", floatIn(math.SmallestNonzeroFloat64, math.MaxFloat64)},
		})
		t.Logf("measured: time to first token %v s, %v output tokens/s (simulated: 0.1 s, 120/s)",
			span.Attributes["tokentap.time_to_first_token"], span.Attributes["tokentap.output_tokens_per_second"])
	})

	t.Run("non-streaming", func(t *testing.T) {
		out := curlOK(t, proxyURL+"/sim/v1/chat/completions", nonStreamRequest)
		span := spans.next(t)
		var body struct {
			ID      string `json:"id"`
			Model   string `json:"model"`
			Choices []struct {
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage *usage `json:"usage"`
		}
		if err := json.Unmarshal(out, &body); err != nil {
			t.Fatalf("the non-streamed response is not JSON: %v\n%s", err, out)
		}
		if body.Usage == nil || len(body.Choices) == 0 {
			t.Fatalf("the simulator's completion lacks usage or choices:\n%s", out)
		}

		checkSpan(t, span, "client", false, []attrCheck{
			{"gen_ai.operation.name", "chat"},
			{"gen_ai.provider.name", "openai"},
			{"gen_ai.request.model", smokeModel},
			// semconv: set if and only if the request streams.
			{"gen_ai.request.stream", absent{}},
			{"gen_ai.response.model", body.Model},
			{"gen_ai.response.id", body.ID},
			{"gen_ai.response.finish_reasons", []any{body.Choices[0].FinishReason}},
			{"gen_ai.usage.input_tokens", int64(body.Usage.PromptTokens)},
			{"gen_ai.usage.output_tokens", int64(body.Usage.CompletionTokens)},
			{"server.address", "127.0.0.1"},
			{"server.port", int64(8081)},
			{"http.response.status_code", int64(200)},
			{"tokentap.outcome", "completed"},
			{"tokentap.usage.source", "reported"},
		})
	})

	t.Run("upstream error", func(t *testing.T) {
		code, out, err := curl(t, proxyURL+"/sim/v1/chat/completions", streamRequest, "Tokentap-Sim-Status: 429")
		span := spans.next(t)
		if code != http.StatusTooManyRequests {
			t.Fatalf("status %d (curl: %v), want 429; body:\n%s", code, err, out)
		}
		checkSpan(t, span, "client", true, []attrCheck{
			{"gen_ai.operation.name", "chat"},
			{"gen_ai.provider.name", "openai"},
			{"gen_ai.request.model", smokeModel},
			{"server.address", "127.0.0.1"},
			{"server.port", int64(8081)},
			{"http.response.status_code", int64(429)},
			{"error.type", "429"},
			{"tokentap.outcome", "throttled"},
		})
	})
}

// curl POSTs body to url with the real curl, streaming (-N), and returns the
// status and the exact bytes received. err is curl's failure, if any:
// --fail-with-body makes an HTTP error status one.
func curl(t *testing.T, url, body string, headers ...string) (status int, out []byte, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), curlTimeout+5*time.Second)
	defer cancel()
	file := filepath.Join(t.TempDir(), "body")
	args := []string{"-sS", "-N", "--fail-with-body", "--max-time", strconv.Itoa(int(curlTimeout.Seconds())),
		"-o", file, "-w", "%{http_code}",
		"-H", "Content-Type: application/json", "--data-binary", body}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	cmd := exec.CommandContext(ctx, "curl", append(args, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if runErr != nil {
		runErr = fmt.Errorf("curl %s: %w: %s", url, runErr, bytes.TrimSpace(stderr.Bytes()))
	}
	out, readErr := os.ReadFile(file)
	if readErr != nil && !errors.Is(readErr, os.ErrNotExist) {
		t.Fatal(readErr)
	}
	status, _ = strconv.Atoi(strings.TrimSpace(stdout.String()))
	return status, out, runErr
}

// curlOK is curl for a request that must succeed. A failure is reported
// but does not end the test, so that the caller still claims the request's
// span, whose attributes usually say what went wrong.
func curlOK(t *testing.T, url, body string) []byte {
	t.Helper()
	status, out, err := curl(t, url, body)
	if err != nil || status != http.StatusOK {
		t.Errorf("POST %s: status %d, %v; body:\n%s", url, status, err, out)
	}
	return out
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// streamSummary is what a client saw in an OpenAI chat stream, to compare
// the span with.
type streamSummary struct {
	id, model     string
	contentChunks int
	finishReasons []any // as the sink decodes a string array
	usage         *usage
}

func parseStream(t *testing.T, out []byte) streamSummary {
	t.Helper()
	var st streamSummary
	dec := sse.Decoder{OnEvent: func(e *sse.Event) {
		if len(e.Type) != 0 {
			t.Fatalf("unexpected SSE event type %q", e.Type)
		}
		if string(e.Data) == "[DONE]" {
			return
		}
		var chunk struct {
			ID      string `json:"id"`
			Model   string `json:"model"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *usage `json:"usage"`
		}
		if err := json.Unmarshal(e.Data, &chunk); err != nil {
			t.Fatalf("chunk %q: %v", e.Data, err)
		}
		st.id, st.model = chunk.ID, chunk.Model
		for _, c := range chunk.Choices {
			// The first chunk carries the role with empty content; it
			// is not a token.
			if c.Delta.Content != "" {
				st.contentChunks++
			}
			if c.FinishReason != nil {
				st.finishReasons = append(st.finishReasons, *c.FinishReason)
			}
		}
		if chunk.Usage != nil {
			st.usage = chunk.Usage
		}
	}}
	_, _ = dec.Write(out)
	dec.Close()
	if n := dec.Stats(); n.Events == 0 || n.Comments > 0 || n.Oversized > 0 {
		t.Fatalf("unexpected SSE stream (%+v): %q", n, out)
	}
	return st
}

// spanClaims hands out the smoke service's spans one per proxied request.
// Requests are made one after another, each waiting for its span, so the
// next span not yet claimed is the one of the request just made, whatever
// its name: a wrong name is then reported as such rather than as a timeout.
type spanClaims struct {
	sink    *otlpsink.Sink
	mu      sync.Mutex
	claimed map[string]bool
}

func (c *spanClaims) next(t *testing.T) otlpsink.Span {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), spanTimeout)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	span, err := c.sink.WaitFor(ctx, func(s otlpsink.Span) bool {
		return s.Resource["service.name"] == smokeService && !c.claimed[s.SpanID]
	})
	if err != nil {
		t.Fatalf("no span from service.name=%s within %v: %v", smokeService, spanTimeout, err)
	}
	if c.claimed == nil {
		c.claimed = map[string]bool{}
	}
	c.claimed[span.SpanID] = true
	return span
}

// attrCheck is one expected attribute: want is the exact value as the sink
// decodes it (string, int64, float64, bool, []any), absent{}, or a check
// function returning what is wrong.
type attrCheck struct {
	key  string
	want any
}

type absent struct{}

func floatIn(lo, hi float64) func(any) string {
	return func(v any) string {
		f, ok := v.(float64)
		if !ok {
			return fmt.Sprintf("want a float64 in [%g, %g]", lo, hi)
		}
		if f < lo || f > hi || math.IsNaN(f) {
			return fmt.Sprintf("want it in [%g, %g]", lo, hi)
		}
		return ""
	}
}

func checkSpan(t *testing.T, span otlpsink.Span, kind string, wantError bool, checks []attrCheck) {
	t.Helper()
	failed := false
	fail := func(format string, args ...any) {
		t.Helper()
		failed = true
		t.Errorf(format, args...)
	}
	if want := "chat " + smokeModel; span.Name != want {
		fail("span name %q, want %q", span.Name, want)
	}
	if span.Kind != kind {
		fail("span kind %q, want %q", span.Kind, kind)
	}
	if isError := span.StatusCode == "error"; isError != wantError {
		fail("span status %q (%q), want error: %v", span.StatusCode, span.StatusMessage, wantError)
	}
	for _, c := range checks {
		got, ok := span.Attributes[c.key]
		switch want := c.want.(type) {
		case absent:
			if ok {
				fail("attribute %s = %#v, want it absent", c.key, got)
			}
		case func(any) string:
			if !ok {
				fail("attribute %s is missing", c.key)
			} else if problem := want(got); problem != "" {
				fail("attribute %s = %#v (%T): %s", c.key, got, got, problem)
			}
		default:
			if !ok {
				fail("attribute %s is missing, want %#v (%T)", c.key, want, want)
			} else if !reflect.DeepEqual(got, want) {
				fail("attribute %s = %#v (%T), want %#v (%T)", c.key, got, got, want, want)
			}
		}
	}
	if failed {
		t.Logf("span %s attributes:\n%s", span, formatAttributes(span.Attributes))
	}
}

func formatAttributes(attrs map[string]any) string {
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s = %#v\n", k, attrs[k])
	}
	return b.String()
}
