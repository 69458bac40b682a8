package meter

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"testing"
)

// TestRecordedOpenAIChat reads real recorded Chat Completions traffic of
// providers whose usage arithmetic differs (testdata/recorded/README.md
// names each file's source and licence). The expected values were written
// by hand from the recorded payloads, not by running tokentap.
//
// Output tokens include reasoning tokens whatever the provider's arithmetic
// (measurement.go): OpenAI's completion_tokens already count reasoning
// (Azure's gpt-5-nano: 15 + 78 = 93 total, 64 of the 78 reasoning), xAI's
// do not (grok-3-mini: 12 + 2 + 340 = 354 total), so tokentap's output
// there is completion plus reasoning.
func TestRecordedOpenAIChat(t *testing.T) {
	tests := []dialectCase{
		{
			name: "xAI grok-3-mini: reasoning outside completion_tokens, counted in the output", fixture: "xai/chat_reasoning.sse",
			// Event 0 carries the role and the first reasoning_content;
			// the answer "G", "rok" is events 340 and 341.
			firstToken: 0, firstVisible: 340, lastToken: 341,
			usage: Usage{12, 2 + 340, 11, -1, 340, UsageReported},
			model: "grok-3-mini", id: "f0f0f217-c24d-1fee-5fe3-28fa1d3c8c94",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 345,
		},
		{
			name: "xAI grok-3-mini tool call, whole in one delta, after reasoning", fixture: "xai/chat_tool_call.sse",
			firstToken: 0, firstVisible: -1, lastToken: 227,
			usage: Usage{307, 26 + 227, 306, -1, 227, UsageReported},
			model: "grok-3-mini", id: "7027d986-3c59-a37a-9a5f-50713e01c8a6",
			finish: []string{"tool_calls"}, outcome: OutcomeCompleted, chunks: 231,
		},
		{
			name: "Azure OpenAI gpt-5-nano: reasoning inside completion_tokens, counted once", fixture: "azure/chat_model_router.sse",
			// Event 0 is the prompt filter results (empty id and model),
			// event 1 the role with an empty content.
			firstToken: 2, firstVisible: 2, lastToken: 5,
			usage: Usage{15, 78, 0, -1, 64, UsageReported},
			model: "gpt-5-nano-2025-08-07", id: "chatcmpl-CYPS1lijGoK8gd9lYzY3r9Sx50nbt",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 9,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{200, "text/event-stream", "/v1/chat/completions"}.start(openAIChat{}, Options{}, []byte(`{"model":"m","stream":true}`))
			checkStream(t, replayPieces(mt, events(testdata(t, "recorded", tt.fixture))), tt)
		})
	}
	t.Run("splits", func(t *testing.T) {
		for _, tt := range tests {
			checkRecordedSplits(t, func() Dialect { return openAIChat{} }, path.Join("recorded", tt.fixture), "text/event-stream")
		}
	})
	bodies := []dialectCase{
		{
			name: "xAI grok-3-mini body: 12 + 1 + 228 = 241", fixture: "xai/chat_reasoning_body.json",
			usage: Usage{12, 1 + 228, 2, -1, 228, UsageReported},
			model: "grok-3-mini", id: "2af5c888-e886-6dcb-7844-95f8fe010b00",
			finish: []string{"stop"}, outcome: OutcomeCompleted,
		},
	}
	for _, tt := range bodies {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{200, "application/json", "/v1/chat/completions"}.start(openAIChat{}, Options{}, []byte(`{"model":"m"}`))
			checkBody(t, readInPieces(mt, testdata(t, "recorded", tt.fixture), 100), tt)
		})
	}
}

// checkRecordedSplits is checkSplitInvariance for recordings, which are too
// long to replay once per byte: the measurement of the whole is also that
// of the recording cut in two around every blank line (each side of the
// line feeds that end an event, the split of a CR/LF pair included), and
// in many pieces at random.
func checkRecordedSplits(t *testing.T, newDialect func() Dialect, file, contentType string) {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	run := func(cuts []int) Measurement {
		mt := New(newDialect(), Options{}, t0)
		mt.Response(200, contentType, "")
		prev := 0
		for _, c := range append(cuts, len(body)) {
			mt.Write(body[prev:c], t0.Add(step))
			prev = c
		}
		return *mt.Finish(t0.Add(step), OutcomeUnknown, "")
	}
	whole := run(nil)
	for i := bytes.IndexByte(body, '\n'); i >= 0; {
		for _, c := range []int{i - 1, i, i + 1, i + 2} {
			if c > 0 && c < len(body) {
				if got := run([]int{c}); !reflect.DeepEqual(got, whole) {
					t.Fatalf("%s: split at %d differs:\n got %+v\nwant %+v", file, c, got, whole)
				}
			}
		}
		next := bytes.Index(body[i+1:], []byte("\n\n"))
		if next < 0 {
			break
		}
		i += 1 + next + 1
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		var cuts []int
		for c := 1 + rnd.IntN(64); c < len(body); c += 1 + rnd.IntN(64) {
			cuts = append(cuts, c)
		}
		if got := run(cuts); !reflect.DeepEqual(got, whole) {
			t.Fatalf("%s: split in %d pieces differs:\n got %+v\nwant %+v", file, len(cuts)+1, got, whole)
		}
	}
}
