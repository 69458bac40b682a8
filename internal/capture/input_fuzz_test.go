package capture

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

var fuzzDialects = []string{
	"openai_chat", "openai_responses", "anthropic_messages", "gemini", "ollama",
	"cohere_chat", "tgi", "bedrock_converse", "bedrock_invoke",
}

// FuzzInput: whatever a client sends, reading it never panics, and each
// result is valid JSON in valid UTF-8 within the bound.
func FuzzInput(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]},{"role":"tool","tool_call_id":"c","content":"x"}]}`,
		`{"instructions":"be","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{\"a\":1}"},{"role":"user","content":"q"}]}`,
		`{"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}]}`,
		`{"systemInstruction":{"parts":[{"text":"s"}]},"contents":[{"role":"model","parts":[{"functionCall":{"name":"f","args":{"a":1}}}]}]}`,
		`{"system":"s","prompt":"p","images":["AA"]}`,
		`{"inputs":"x\u2028\ud83d\ude00"}`,
		`{"system":[{"text":"s"}],"messages":[{"role":"user","content":[{"toolResult":{"toolUseId":"t","content":[{"json":{"a":1}}]}}]}]}`,
		"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\x01\"}]}",
		`{"messages":[{"role":"user","content":"cut off`,
	} {
		for i := range fuzzDialects {
			f.Add([]byte(s), uint8(i), uint16(MinMaxSize))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, dialect uint8, max uint16) {
		limit := MinMaxSize + int(max)%4096
		system, input := Input(fuzzDialects[int(dialect)%len(fuzzDialects)], body, limit)
		for _, r := range []Result{system, input} {
			if r.JSON == "" {
				continue
			}
			if len(r.JSON) > limit || !utf8.ValidString(r.JSON) || !json.Valid([]byte(r.JSON)) {
				t.Fatalf("invalid or over %d bytes (%d): %s", limit, len(r.JSON), r.JSON)
			}
		}
	})
}
