package meter

import (
	"strings"
	"testing"
)

func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int64
	}{
		{"empty", "", 0},
		{"word with its space is one token", " model", 1},
		{"bare word", "Hello", 1},
		{"punctuation is its own token", "Hello, world!", 4},
		{"long word splits", " internationalization", 2},
		{"common long word stays whole", " outstanding", 1},
		{"digits group in threes", "1234567", 3},
		{"escaped newlines are one token per run", `\n\n`, 1},
		{"escaped quote", `\"`, 1},
		{"unicode escape", `\u00e9`, 1},
		{"raw multi-byte characters", "日本語", 3},
		{"spaces run", "    x", 2},
		{"tool arguments", `{\"city\":\"Paris\"}`, 9},
		{"raw control byte does not stall", "\x08ello", 2},
		{"DEL does not stall", "a\x7f", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EstimateTokens([]byte(tt.in)); got != tt.want {
				t.Errorf("EstimateTokens(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestProviderForHost(t *testing.T) {
	tests := []struct{ host, want string }{
		{"api.openai.com", "openai"},
		{"API.OpenAI.com.", "openai"},
		{"myres.openai.azure.com", "azure.ai.openai"},
		{"api.anthropic.com", "anthropic"},
		{"generativelanguage.googleapis.com", "gcp.gemini"},
		{"us-central1-aiplatform.googleapis.com", "gcp.vertex_ai"},
		{"bedrock-runtime.us-east-1.amazonaws.com", "aws.bedrock"},
		{"s3.amazonaws.com", ""},
		{"notapi.openai.com.evil.example", ""},
		{"127.0.0.1", ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			if got := ProviderForHost(tt.host); got != tt.want {
				t.Errorf("ProviderForHost(%q) = %q, want %q", tt.host, got, tt.want)
			}
		})
	}
}

func TestDetectDialect(t *testing.T) {
	tests := []struct{ path, dialect, op string }{
		{"/v1/chat/completions", "openai_chat", "chat"},
		{"/openai/deployments/gpt4/chat/completions", "openai_chat", "chat"},
		{"/v1/completions", "openai_chat", "text_completion"},
		{"/v1/embeddings/", "openai_chat", "embeddings"},
		{"/something/else", "openai_chat", "chat"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			d := DetectDialect(tt.path)
			if d.Name != tt.dialect || d.New().Operation(tt.path) != tt.op {
				t.Errorf("got %s %s", d.Name, d.New().Operation(tt.path))
			}
		})
	}
}

// countingEstimator counts the bytes it was asked to count.
type countingEstimator struct{ bytes int }

func (c *countingEstimator) Tokens(text []byte) int64 {
	c.bytes += len(text)
	return int64(len(text))
}

// TestEstimatorBounds: the Estimator sees the decoded text of usage-less
// streams' deltas, never a delta over maxTokenizedDelta (counted by the
// heuristic instead, so a huge delta cannot hold the stream back), and
// never a stream that asked for usage.
func TestEstimatorBounds(t *testing.T) {
	huge := strings.Repeat("a", 256<<10)
	for _, tt := range []struct {
		name      string
		request   string
		delta     string
		wantBytes int
	}{
		{"usage-less delta, decoded", `{"stream":true}`, `line\nbreak`, len("line\nbreak")},
		{"huge delta goes to the heuristic", `{"stream":true}`, huge, 0},
		{"usage asked for", `{"stream":true,"stream_options":{"include_usage":true}}`, "hello", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			est := &countingEstimator{}
			mt := New(openAIChat{}, Options{Estimator: est}, t0)
			mt.Request("/v1/chat/completions", []byte(tt.request), false)
			mt.Response(200, "text/event-stream", "")
			mt.Write([]byte(`data: {"choices":[{"index":0,"delta":{"content":"`+tt.delta+`"}}]}`+"\n\n"), t0.Add(step))
			m := mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
			if est.bytes != tt.wantBytes {
				t.Errorf("the estimator saw %d bytes, want %d", est.bytes, tt.wantBytes)
			}
			if m.EstimatedOutputTokens <= 0 {
				t.Errorf("no estimate: %+v", m)
			}
		})
	}
}
