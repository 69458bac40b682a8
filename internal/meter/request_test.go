package meter

import (
	"reflect"
	"strings"
	"testing"
)

// TestSamplingParameters: each API's names for the seed, top-k, the
// penalties, the stop sequences and the choice count, read where the API
// keeps them; a wrong JSON type is unknown, a choice count of 1 is not
// kept (the conventions set it only when it is not 1), and at most
// maxStopSequences stop sequences are.
func TestSamplingParameters(t *testing.T) {
	many := `"` + strings.Repeat(`s","`, 20) + `s"`
	tests := []struct {
		name, dialect, path, body string
		want                      Request
	}{
		{"openai chat: all of them", "openai_chat", "/v1/chat/completions",
			`{"model":"m","seed":7,"top_k":40,"stop":["\n\n","END"],"n":3,"frequency_penalty":0.5,"presence_penalty":-0.25}`,
			Request{Model: "m", Seed: 7, HasSeed: true, TopK: 40, HasTopK: true, StopSequences: []string{"\n\n", "END"},
				ChoiceCount: 3, HasChoiceCount: true, FrequencyPenalty: 0.5, HasFrequencyPenalty: true, PresencePenalty: -0.25, HasPresencePenalty: true}},
		{"openai chat: stop as one string, n of 1 left out", "openai_chat", "/v1/chat/completions",
			`{"model":"m","stop":"END","n":1}`, Request{Model: "m", StopSequences: []string{"END"}}},
		{"openai chat: wrong types are unknown", "openai_chat", "/v1/chat/completions",
			`{"model":"m","seed":"7","top_k":null,"stop":42,"n":"2","frequency_penalty":true}`, Request{Model: "m"}},
		{"openai chat: stop sequences capped", "openai_chat", "/v1/chat/completions",
			`{"model":"m","stop":[` + many + `]}`, Request{Model: "m", StopSequences: strings.Split(strings.Repeat("s,", maxStopSequences-1)+"s", ",")}},
		{"anthropic: top_k and stop_sequences", "anthropic_messages", "/v1/messages",
			`{"model":"claude","max_tokens":10,"top_k":5,"stop_sequences":["Human:"]}`,
			Request{Model: "claude", MaxTokens: 10, HasMaxTokens: true, TopK: 5, HasTopK: true, StopSequences: []string{"Human:"}}},
		{"cohere: k is top-k", "cohere_chat", "/v2/chat",
			`{"model":"command-a","seed":1,"k":10,"stop_sequences":["x"],"frequency_penalty":0.1,"presence_penalty":0.2}`,
			Request{Model: "command-a", Seed: 1, HasSeed: true, TopK: 10, HasTopK: true, StopSequences: []string{"x"},
				FrequencyPenalty: 0.1, HasFrequencyPenalty: true, PresencePenalty: 0.2, HasPresencePenalty: true}},
		{"gemini: generationConfig in JSON names", "gemini", "/v1beta/models/gemini-2.5-flash:generateContent",
			`{"generationConfig":{"seed":3,"topK":20,"stopSequences":["a","b"],"candidateCount":2,"frequencyPenalty":0.3,"presencePenalty":0.4}}`,
			Request{Model: "gemini-2.5-flash", HasStream: true, Seed: 3, HasSeed: true, TopK: 20, HasTopK: true, StopSequences: []string{"a", "b"},
				ChoiceCount: 2, HasChoiceCount: true, FrequencyPenalty: 0.3, HasFrequencyPenalty: true, PresencePenalty: 0.4, HasPresencePenalty: true}},
		{"gemini: proto names", "gemini", "/v1beta/models/gemini-2.5-flash:generateContent",
			`{"generation_config":{"top_k":8,"stop_sequences":["z"],"candidate_count":1}}`,
			Request{Model: "gemini-2.5-flash", HasStream: true, TopK: 8, HasTopK: true, StopSequences: []string{"z"}}},
		{"ollama: under options", "ollama", "/api/chat",
			`{"model":"llama3.2","options":{"seed":42,"top_k":30,"stop":["<|eot|>"],"presence_penalty":1.5}}`,
			Request{Model: "llama3.2", Stream: true, HasStream: true, Seed: 42, HasSeed: true, TopK: 30, HasTopK: true,
				StopSequences: []string{"<|eot|>"}, PresencePenalty: 1.5, HasPresencePenalty: true}},
		{"ollama: not at the top level", "ollama", "/api/chat",
			`{"model":"llama3.2","seed":42,"stop":["x"]}`, Request{Model: "llama3.2", Stream: true, HasStream: true}},
		{"bedrock converse: stop sequences and the model's top_k", "bedrock_converse", "/model/anthropic.claude-3-haiku/converse",
			`{"inferenceConfig":{"stopSequences":["END"]},"additionalModelRequestFields":{"top_k":200}}`,
			Request{Model: "anthropic.claude-3-haiku", HasStream: true, TopK: 200, HasTopK: true, StopSequences: []string{"END"}}},
		{"bedrock invoke: Anthropic's native names", "bedrock_invoke", "/model/anthropic.claude-3-haiku/invoke",
			`{"max_tokens":10,"top_k":50,"stop_sequences":["Human:"]}`,
			Request{Model: "anthropic.claude-3-haiku", HasStream: true, MaxTokens: 10, HasMaxTokens: true, TopK: 50, HasTopK: true, StopSequences: []string{"Human:"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, ok := LookupDialect(tt.dialect)
			if !ok {
				t.Fatalf("no dialect %s", tt.dialect)
			}
			var r Request
			info.New().Request(&r, tt.path, []byte(tt.body))
			if !reflect.DeepEqual(r, tt.want) {
				t.Errorf("got  %+v\nwant %+v", r, tt.want)
			}
		})
	}
}
