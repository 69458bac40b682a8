package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/meter/tokencount"
)

// TestTokenizerCountsUsagelessStreams streams text whose o200k count is
// known, one token per delta, without usage: the default tokenizer counts it
// exactly, "none" falls back to the heuristic, and a stream whose request
// asked for usage is never tokenized (its count comes from the usage chunk).
func TestTokenizerCountsUsagelessStreams(t *testing.T) {
	text := "Measured under real load, the median and the tail tell different stories: 東京 at 120 tokens/s."
	c, err := tokencount.New("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	exact := c.Tokens([]byte(text))
	heuristic := meter.EstimateTokens([]byte(text))
	if exact == heuristic {
		t.Fatalf("the test text must tell the two apart: both count %d", exact)
	}
	// Deltas are words with their leading space, as OpenAI streams them;
	// JSON-escaped as on the wire.
	var stream strings.Builder
	for i, w := range strings.Split(text, " ") {
		if i > 0 {
			w = " " + w
		}
		js, _ := json.Marshal(w)
		fmt.Fprintf(&stream, "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%s}}]}\n\n", js)
	}
	withUsage := stream.String() + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":7}}\n\n"

	tests := []struct {
		name       string
		tokenizer  string
		request    string
		body       string
		wantTokens int64
		wantSource string
	}{
		{"default tokenizer", "", `{"model":"m","stream":true}`, stream.String(), exact, "estimated"},
		{"cl100k", "cl100k_base", `{"model":"m","stream":true}`, stream.String(), mustCount(t, "cl100k_base", text), "estimated"},
		{"heuristic", "none", `{"model":"m","stream":true}`, stream.String(), heuristic, "estimated"},
		{"usage asked and reported", "", `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, withUsage, 7, "reported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body + "data: [DONE]\n\n")
			hs := newHarness(t, &Handler{Tokenizer: tt.tokenizer}, streamUpstream(body, nil))
			resp := post(t, hs.srv.URL, tt.request)
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(got) != string(body) {
				t.Fatal("the client did not get the stream as sent")
			}
			a := attrs(hs.span(t))
			if n := a["gen_ai.usage.output_tokens"].AsInt64(); n != tt.wantTokens {
				t.Errorf("output tokens %d, want %d", n, tt.wantTokens)
			}
			if s := a["tokentap.usage.source"].AsString(); s != tt.wantSource {
				t.Errorf("usage source %q, want %q", s, tt.wantSource)
			}
		})
	}
}

func mustCount(t *testing.T, encoding, text string) int64 {
	c, err := tokencount.New(encoding)
	if err != nil {
		t.Fatal(err)
	}
	return c.Tokens([]byte(text))
}

func TestTokenizerConfig(t *testing.T) {
	for _, tt := range []struct {
		name, tokenizer, wantErr string
	}{
		{"default", "", ""},
		{"none", "none", ""},
		{"cl100k", "cl100k_base", ""},
		{"unknown", "gpt2", `unknown token encoding "gpt2"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &Handler{Tokenizer: tt.tokenizer}
			err := h.provisionTokenizer()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (h.cfg.Estimator == nil) != (tt.tokenizer == "none") {
				t.Errorf("estimator %v for tokenizer %q", h.cfg.Estimator, tt.tokenizer)
			}
		})
	}
}
