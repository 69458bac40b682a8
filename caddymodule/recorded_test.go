package caddymodule

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"go.opentelemetry.io/otel/attribute"

	"github.com/tokentap/tokentap/internal/meter"
)

// recordedDir holds the real provider traffic of meter's tests
// (internal/meter/testdata/recorded/README.md names each file's source).
const recordedDir = "../internal/meter/testdata/recorded"

// recordedRoute is how a recording is served: the request path that picks
// its dialect and the response's media type, from its provider's folder
// and its name.
func recordedRoute(file string) (reqPath, contentType string, err error) {
	dir, name := path.Split(file)
	dir = strings.TrimSuffix(dir, "/")
	contentType = "text/event-stream"
	switch path.Ext(name) {
	case ".json":
		contentType = "application/json"
	case ".ndjson":
		contentType = "application/x-ndjson"
	case ".eventstream", ".bin":
		contentType = "application/vnd.amazon.eventstream"
	}
	if strings.HasPrefix(name, "responses_") {
		return "/v1/responses", contentType, nil
	}
	switch dir {
	case "openai", "azure", "xai", "deepseek", "groq", "mistral", "alibaba", "perplexity", "moonshotai", "openrouter":
		return "/v1/chat/completions", contentType, nil
	case "anthropic":
		return "/v1/messages", contentType, nil
	case "google", "vertexai":
		if contentType == "application/json" {
			return "/v1beta/models/m:generateContent", contentType, nil
		}
		return "/v1beta/models/m:streamGenerateContent?alt=sse", contentType, nil
	case "bedrock":
		op := "converse"
		if strings.HasPrefix(name, "invoke_") {
			op = "invoke"
		}
		if contentType == "application/json" {
			return "/model/m/" + op, contentType, nil
		}
		if op == "invoke" {
			return "/model/m/invoke-with-response-stream", contentType, nil
		}
		return "/model/m/converse-stream", contentType, nil
	case "cohere":
		return "/v2/chat", contentType, nil
	case "ollama":
		if strings.Contains(name, "generate") {
			return "/api/generate", contentType, nil
		}
		if contentType == "text/event-stream" {
			return "/v1/chat/completions", contentType, nil
		}
		return "/api/chat", contentType, nil
	}
	return "", "", fmt.Errorf("%s: no route for folder %q; add one to recordedRoute", file, dir)
}

// TestRecordedThroughCaddy: every recording of real provider traffic,
// served by an upstream that writes it in random pieces (flushing each),
// reaches the client through tokentap in a real reverse_proxy byte for
// byte, and its span says what the meter measures of the same bytes read
// whole: the dialect the path picked, the counts (billed ones too, which
// only Cohere's recordings have), model, id and outcome.
// The hand-written expectations of each recording are meter's tests; this
// one holds the path from the upstream's writes to the span.
func TestRecordedThroughCaddy(t *testing.T) {
	var files []string
	err := filepath.WalkDir(recordedDir, func(p string, d fs.DirEntry, err error) error {
		// The notes, the scripts that remake some files and the headers
		// recorded beside a recording are not recordings.
		if err != nil || d.IsDir() || path.Ext(p) == ".md" || path.Ext(p) == ".py" || path.Ext(p) == ".headers" {
			return err
		}
		rel, _ := filepath.Rel(recordedDir, p)
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no recordings in %s: %v", recordedDir, err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(5, 6))
	up := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		file := r.Header.Get("X-Recording")
		body, err := readRecording(file)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		_, ct, _ := recordedRoute(file)
		w.Header().Set("Content-Type", ct)
		for name, values := range recordedHeader(file) {
			w.Header()[name] = values
		}
		f := w.(http.Flusher)
		for _, piece := range randomPieces(rnd, body) {
			_, _ = w.Write(piece)
			f.Flush()
		}
	})}
	go func() { _ = up.Serve(ln) }()
	t.Cleanup(func() { _ = up.Close() })
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{TestRequestTimeout: 30 * time.Second})
	tester.InitServer(fmt.Sprintf(compressedTimingConfig, ln.Addr()), "caddyfile")
	rec := integrationSpans

	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			reqPath, ct, err := recordedRoute(file)
			if err != nil {
				t.Fatal(err)
			}
			body, err := readRecording(file)
			if err != nil {
				t.Fatal(err)
			}
			reqBody := `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`
			if ct == "application/json" {
				reqBody = `{"model":"m"}`
			}
			before := len(rec.Ended())
			req, _ := http.NewRequest("POST", "http://localhost:9080/up"+reqPath, strings.NewReader(reqBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Recording", file)
			resp, err := tester.Client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("the client got %d bytes (%v), the upstream sent %d: not the same", len(got), err, len(body))
			}
			a := attrs(waitSpans(t, rec, before+1)[before])

			info := meter.DetectDialect(strings.SplitN(reqPath, "?", 2)[0])
			mt := meter.New(info.New(), meter.Options{}, time.Now())
			mt.Request(reqPath, []byte(reqBody), false)
			mt.ResponseHeader(recordedHeader(file))
			mt.Response(200, ct, "")
			mt.Write(body, time.Now())
			m := mt.Finish(time.Now(), meter.OutcomeUnknown, "")

			if a[attrDialect].AsString() != info.Name {
				t.Errorf("dialect %q, want %q", a[attrDialect].AsString(), info.Name)
			}
			checks := []struct {
				key  string
				want int64
			}{
				{"gen_ai.usage.input_tokens", m.Usage.InputTokens},
				{"gen_ai.usage.output_tokens", m.Usage.OutputTokens},
				{"gen_ai.usage.cache_read.input_tokens", m.Usage.CacheReadInputTokens},
				{"gen_ai.usage.cache_creation.input_tokens", m.Usage.CacheCreationInputTokens},
				{"gen_ai.usage.reasoning.output_tokens", m.Usage.ReasoningOutputTokens},
				{"tokentap.usage.billed_input_tokens", m.Billed.InputTokens},
				{"tokentap.usage.billed_output_tokens", m.Billed.OutputTokens},
			}
			for _, c := range checks {
				v, ok := a[attribute.Key(c.key)]
				if c.want < 0 {
					if ok {
						t.Errorf("%s = %v, want absent", c.key, v.Emit())
					}
					continue
				}
				if !ok || v.AsInt64() != c.want {
					t.Errorf("%s = %v, want %d", c.key, v.Emit(), c.want)
				}
			}
			if got := a["tokentap.outcome"].AsString(); got != m.Outcome.String() {
				t.Errorf("outcome %q, want %q", got, m.Outcome)
			}
			if got := a["gen_ai.response.id"].AsString(); got != m.ResponseID {
				t.Errorf("response id %q, want %q", got, m.ResponseID)
			}
			if got := a["gen_ai.response.model"].AsString(); got != m.ResponseModel {
				t.Errorf("response model %q, want %q", got, m.ResponseModel)
			}
			if got := a["tokentap.degraded"].AsInt64(); got != m.Degraded {
				t.Errorf("degraded %d, want %d", got, m.Degraded)
			}
		})
	}
}

func readRecording(file string) ([]byte, error) {
	return os.ReadFile(filepath.Join(recordedDir, filepath.FromSlash(file)))
}

// recordedHeader is the response header recorded beside a recording (its
// .headers file: Bedrock's token counts and latency, one "Name: value" a
// line), or nil.
func recordedHeader(file string) http.Header {
	b, err := readRecording(file + ".headers")
	if err != nil {
		return nil
	}
	h := http.Header{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if name, value, ok := strings.Cut(line, ": "); ok {
			h.Add(name, value)
		}
	}
	return h
}

// randomPieces cuts b into 1 to 16 pieces at random places.
func randomPieces(rnd *rand.Rand, b []byte) [][]byte {
	n := 1 + rnd.IntN(16)
	var out [][]byte
	for i := 0; i < n-1 && len(b) > 1; i++ {
		c := 1 + rnd.IntN(len(b)-1)
		if c > len(b)/2 {
			c = len(b) / 2
		}
		out, b = append(out, b[:c]), b[c:]
	}
	return append(out, b)
}
