package meter

import "testing"

// openAICompatMS converts a millisecond figure the way a server's JSON
// number is converted, so expected seconds compare exactly.
func openAICompatMS(ms float64) float64 { return ms / 1000 }

// TestOpenAICompatStreams reads the OpenAI-compatible servers' streams with
// the openai_chat dialect, one case per way they differ from OpenAI.
func TestOpenAICompatStreams(t *testing.T) {
	tests := []dialectCase{
		{
			name: "llama.cpp: usage and timings on the finish chunk; cache_n is cache read", fixture: "compat_llamacpp_timings.sse",
			firstToken: 1, firstVisible: 1, lastToken: 7,
			usage: Usage{63, 8, 42, -1, -1, UsageReported},
			model: "qwen2.5-7b-instruct-q4_k_m.gguf", id: "chatcmpl-ZTY0b5dNu5yXn1wXJcF0k1mDq2mJ7QzR",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 10,
			timings: []ServerTiming{{"prompt", openAICompatMS(48.17)}, {"predicted", openAICompatMS(107.9)}},
		},
		{
			name: "llama.cpp before PR 16109: non-standard error: field then [DONE] is an upstream error", fixture: "compat_llamacpp_error_field.sse",
			firstToken: -1, firstVisible: -1, lastToken: -1,
			usage:   Usage{-1, -1, -1, -1, -1, UsageAbsent},
			outcome: OutcomeUpstreamError, errorType: "invalid_request_error", chunks: 2,
		},
		{
			name: "Groq 2024: usage only in x_groq.usage, with queue/prompt/completion/total times", fixture: "compat_groq_x_groq_usage.sse",
			firstToken: 1, firstVisible: 1, lastToken: 7,
			usage: Usage{18, 8, -1, -1, -1, UsageReported},
			model: "gemma2-9b-it", id: "chatcmpl-e7f8e220-656c-4455-a132-dacfc1370798",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 10,
			timings: []ServerTiming{{"queue", 0.061348671}, {"prompt", 0.000211569}, {"completion", 0.014545455}, {"total", 0.014757024}},
		},
		{
			name: "Groq 2026: usage with times at the top level and in x_groq", fixture: "compat_groq_usage.sse",
			firstToken: 1, firstVisible: 1, lastToken: 7,
			usage: Usage{45, 8, -1, -1, -1, UsageReported},
			model: "llama-3.3-70b-versatile", id: "chatcmpl-7eb08824-fb8d-47af-a1f0-3aa786f2d1f3",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 10,
			timings: []ServerTiming{{"queue", 0.041905864}, {"prompt", 0.003940145}, {"completion", 0.032051282}, {"total", 0.035991427}},
		},
		{
			name: "DeepSeek: keep-alive comments are no chunks; prompt_cache_hit_tokens is cache read", fixture: "compat_deepseek_cache_hit.sse",
			firstToken: 3, firstVisible: 3, lastToken: 11, firstChunk: 2,
			usage: Usage{80, 9, 64, -1, -1, UsageReported},
			model: "deepseek-chat", id: "930c60df-bf64-41c9-a88e-3ec75f81e00e",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 12,
		},
		{
			name: "vLLM continuous_usage_stats: cumulative usage on every chunk, the last wins", fixture: "compat_vllm_continuous_usage.sse",
			firstToken: 1, firstVisible: 1, lastToken: 6,
			usage: Usage{12, 7, -1, -1, -1, UsageReported},
			model: "meta-llama/Llama-3.1-8B-Instruct", id: "chatcmpl-b3a1f0e2c4d54e6f8a9b0c1d2e3f4a5b",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 10,
		},
		{
			name: "vLLM continuous_usage_stats cut mid-stream: truncated, yet the last cumulative usage is reported", fixture: "compat_vllm_continuous_truncated.sse",
			firstToken: 1, firstVisible: 1, lastToken: 4,
			usage: Usage{12, 4, -1, -1, -1, UsageReported},
			model: "meta-llama/Llama-3.1-8B-Instruct", id: "chatcmpl-b3a1f0e2c4d54e6f8a9b0c1d2e3f4a5b",
			outcome: OutcomeTruncated, errorType: "truncated", chunks: 5,
		},
		{
			name: "Mistral: usage on the finish chunk, p padding is never text", fixture: "compat_mistral_usage_p.sse",
			firstToken: 1, firstVisible: 1, lastToken: 2,
			usage: Usage{19, 3, 0, -1, -1, UsageReported},
			model: "mistral-small-latest", id: "b5810ef13dbb4811a20d34e1393d8431",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 5,
		},
		{
			name: "Magistral: content as an array of typed parts, thinking before text", fixture: "compat_mistral_magistral.sse",
			firstToken: 0, firstVisible: 2, lastToken: 2,
			usage: Usage{10, 46, -1, -1, -1, UsageReported},
			model: "magistral-medium-2507", id: "a4e29c5b82f94d67b23e108a7c9df6e1",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 5,
		},
		{
			name: "Magistral cut before usage: the array parts are estimated", fixture: "compat_mistral_magistral_truncated.sse",
			firstToken: 0, firstVisible: 2, lastToken: 2,
			usage: Usage{-1, 14, -1, -1, -1, UsageEstimated},
			model: "magistral-medium-2507", id: "a4e29c5b82f94d67b23e108a7c9df6e1",
			outcome: OutcomeTruncated, errorType: "truncated", chunks: 3,
		},
		{
			name: "Together: choices carry text and delta.content; finish_reason eos", fixture: "compat_together_text_delta.sse",
			firstToken: 0, firstVisible: 0, lastToken: 6,
			usage: Usage{12, 8, -1, -1, -1, UsageReported},
			model: "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo", id: "8b43a5cfadf99e5c-SJC",
			finish: []string{"eos"}, outcome: OutcomeCompleted, chunks: 9,
		},
		{
			name: "Together cut before usage: the same fragment in text and delta.content is estimated once", fixture: "compat_together_text_delta_truncated.sse",
			firstToken: 0, firstVisible: 0, lastToken: 4,
			usage: Usage{-1, 5, -1, -1, -1, UsageEstimated},
			model: "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo", id: "8b43a5cfadf99e5c-SJC",
			outcome: OutcomeTruncated, errorType: "truncated", chunks: 5,
		},
		{
			name: "Together docs shape: top-level token objects are not text; top-level finish_reason", fixture: "compat_together_token.sse",
			firstToken: 0, firstVisible: 0, lastToken: 3,
			usage:  Usage{31, 4, -1, -1, -1, UsageReported},
			id:     "85ffbb8a6d2c4340-EWR",
			finish: []string{"eos"}, outcome: OutcomeCompleted, chunks: 5,
		},
		{
			name: "OpenRouter: processing comments, delta.reasoning, usage with cost and reasoning tokens", fixture: "compat_openrouter_reasoning.sse",
			firstToken: 1, firstVisible: 4, lastToken: 8, firstChunk: 1,
			usage: Usage{14, 120, 0, -1, 112, UsageReported},
			model: "google/gemini-2.5-flash", id: "gen-1767225600-or7Qx2",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 10,
		},
		{
			name: "OpenRouter: error chunk with finish_reason error and no [DONE] is an error, not a truncation", fixture: "compat_openrouter_error_no_done.sse",
			firstToken: 1, firstVisible: 1, lastToken: 2, firstChunk: 1,
			usage: Usage{-1, 2, -1, -1, -1, UsageEstimated},
			model: "google/gemini-2.5-flash", id: "gen-1767225600-or7Qx2",
			finish: []string{"error"}, outcome: OutcomeUpstreamError, errorType: "server_error", chunks: 3,
		},
		{
			name: "Ollama /v1: no role-only chunk, the first chunk is a token; delta.reasoning is not visible", fixture: "compat_ollama_v1.sse",
			firstToken: 0, firstVisible: 2, lastToken: 3,
			usage: Usage{17, 40, -1, -1, -1, UsageReported},
			model: "deepseek-r1:1.5b", id: "chatcmpl-509",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 7,
		},
		{
			name: "older Ollama /v1: finish_reason \"\" on content chunks is no finish reason", fixture: "compat_ollama_v1_old.sse",
			firstToken: 0, firstVisible: 0, lastToken: 3,
			usage: Usage{-1, 4, -1, -1, -1, UsageEstimated},
			model: "deepseek-r1:1.5b", id: "chatcmpl-509",
			finish: []string{"stop"}, outcome: OutcomeCompleted, chunks: 6,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkStream(t, replay(t, tt.fixture, 200, "text/event-stream"), tt)
		})
	}
}

// TestOpenAICompatBodies: the non-streamed responses of servers that put
// their own timings in the body.
func TestOpenAICompatBodies(t *testing.T) {
	tests := []dialectCase{
		{
			name: "Groq: the *_time fields sit inside usage", fixture: "compat_groq_completion.json",
			usage: Usage{41, 8, -1, -1, -1, UsageReported}, model: "llama-3.1-8b-instant",
			id: "chatcmpl-2c5d9a4e-8f1b-4b7e-9d3a-6e0f1a2b3c4d", finish: []string{"stop"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"queue", 0.017829813}, {"prompt", 0.002261521}, {"completion", 0.010666667}, {"total", 0.012928188}},
		},
		{
			name: "llama.cpp: timings next to usage; cache_n 0 is a known zero", fixture: "compat_llamacpp_completion.json",
			usage: Usage{63, 8, 0, -1, -1, UsageReported}, model: "qwen2.5-7b-instruct-q4_k_m.gguf",
			id: "chatcmpl-mX3hH7qzP0b2cW5tVyR8uN1kLdF4sG6e", finish: []string{"stop"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"prompt", openAICompatMS(4.817)}, {"predicted", openAICompatMS(107.933)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := testdata(t, "openai", tt.fixture)
			mt := exchange{200, "application/json", "/v1/chat/completions"}.start(openAIChat{}, Options{}, []byte(`{"model":"m"}`))
			checkBody(t, readInPieces(mt, body, len(body)), tt)
		})
	}
}
