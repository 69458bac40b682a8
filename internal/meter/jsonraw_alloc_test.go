package meter

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// The zero-allocation tests of each dialect replay fixtures whose deltas
// happen to have no JSON escapes, and a JSON decoder allocates only for a
// string with an escape in it: generated text with a newline, a quote or a
// non-ASCII character written as \u00e9, and every tool-call argument
// fragment ({\"city\":). These tests feed such events to every dialect
// this package reads with the shared raw reader (jsonraw.go).

// escapeEvent is one event of a dialect's stream whose strings are full of
// escapes.
type escapeEvent struct {
	name string
	// event is the bytes of one event as they arrive: an SSE event with its
	// blank line, an NDJSON line, or an event stream message.
	event []byte
	// output says the event is generated output, which the test checks
	// was counted, so that a dialect that skipped it would not pass for
	// allocating nothing.
	output bool
	// check, if set, is what else the event must have recorded.
	check func(m *Measurement) bool
}

// escapeDialect is a dialect, the stream it is warmed with, and its events.
type escapeDialect struct {
	name, path, contentType string
	warm                    [][]byte
	events                  []escapeEvent
}

func sseData(data string) []byte { return []byte("data: " + data + "\n\n") }

func sseTyped(typ, data string) []byte {
	return []byte("event: " + typ + "\ndata: " + data + "\n\n")
}

func ndjsonLine(line string) []byte { return []byte(line + "\n") }

// escapedChunk is an InvokeModelWithResponseStream chunk message holding the
// model-native JSON event native; with slashEscaped its base64 is written
// with every "/" as "\/", as some JSON encoders do.
func escapedChunk(native string, slashEscaped bool) []byte {
	enc := base64.StdEncoding.EncodeToString([]byte(native))
	if slashEscaped {
		enc = strings.ReplaceAll(enc, "/", `\/`)
	}
	return bedrockFrame("chunk", []byte(`{"bytes":"`+enc+`","p":"abc"}`))
}

// escapeDialects lists, for every dialect, events whose strings have
// escapes in every place a dialect reads: text, reasoning, tool-call
// arguments, and the ids, models and finish reasons it keeps.
func escapeDialects(t testing.TB) []escapeDialect {
	// A base64 chunk with a "/" in it, so that the escaped-slash case has
	// something to unescape.
	slashNative := `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"??>>\n\"q\" caf\u00e9 ???"}}`
	if !strings.Contains(base64.StdEncoding.EncodeToString([]byte(slashNative)), "/") {
		t.Fatal("the escaped-slash chunk has no slash in its base64")
	}
	usage := func(m *Measurement) bool { return m.Usage.Source == UsageReported }
	finished := func(m *Measurement) bool { return len(m.FinishReasons) > 0 && m.FinishReasons[0] != "" }
	failed := func(m *Measurement) bool { return m.ErrorType != "" }
	return []escapeDialect{
		{
			name: "openai_chat", path: "/v1/chat/completions", contentType: "text/event-stream",
			warm: [][]byte{sseData(`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"finish_reason":null}]}`)},
			events: []escapeEvent{
				{name: "content", output: true, event: sseData(`{"id":"chatcmpl-\"1\"","object":"chat.completion.chunk","created":1,"model":"meta-llama\/Llama-3.1-8B-Instruct","system_fingerprint":"fp_\u0031","choices":[{"index":0,"delta":{"content":"line\nbreak, \"quoted\" caf\u00e9 \ud83d\ude00\\"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"a\"b"}`)},
				{name: "refusal", output: true, event: sseData(`{"choices":[{"index":0,"delta":{"refusal":"I can\u2019t \"help\"\n"}}]}`)},
				{name: "reasoning_content", output: true, event: sseData(`{"choices":[{"index":0,"delta":{"reasoning_content":"Let me think:\n1. \"x\"\t\u00e9"}}]}`)},
				{name: "reasoning", output: true, event: sseData(`{"choices":[{"index":0,"delta":{"content":null,"reasoning":"hmm\n\"y\""}}]}`)},
				{name: "tool-call argument fragment", output: true, event: sseData(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_\u0031","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}]}}]}`)},
				{name: "tool-call argument continuation", output: true, event: sseData(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":" \"S\u00e3o Paulo\"}"}}]}}]}`)},
				{name: "legacy function_call", output: true, event: sseData(`{"choices":[{"index":0,"delta":{"function_call":{"arguments":"{\"unit\":\"c\"}"}}}]}`)},
				{name: "Mistral content parts", output: true, event: sseData(`{"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text","text":"Hmm,\n\"why\"?"}]},{"type":"text","text":"A\tB\u00e9"}]}}]}`)},
				{name: "legacy text", output: true, event: sseData(`{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"caf\u00e9\n\"x\"","logprobs":null,"finish_reason":null}],"model":"gpt-3.5-turbo-instruct"}`)},
				{name: "usage, Groq times and llama.cpp timings", check: usage, event: sseData(`{"id":"chatcmpl-\"1\"","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":1},"queue_time":0.01,"prompt_time":0.02},"x_groq":{"id":"req_\"1\"","usage":{"queue_time":0.1,"completion_time":0.2}},"timings":{"prompt_ms":12.5,"predicted_ms":40,"cache_n":3},"system_fingerprint":"fp_\u0031"}`)},
				{name: "usage with cache writes and OpenRouter's cost", check: func(m *Measurement) bool { return m.Usage.CacheCreationInputTokens == 3211 }, event: sseData(`{"id":"gen-1","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":3214,"completion_tokens":100,"total_tokens":3314,"cost":0.01355025,"is_byok":false,"prompt_tokens_details":{"cached_tokens":0,"cache_write_tokens":3211,"audio_tokens":0,"video_tokens":0},"cost_details":{"upstream_inference_cost":null},"completion_tokens_details":{"reasoning_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0,"audio_tokens":0}}}`)},
				{name: "finish reason beside choices", check: finished, event: sseData(`{"id":"x","choices":[],"finish_reason":"length","note":"a\nb"}`)},
				{name: "error event", check: failed, event: sseTyped("error", `{"error":{"message":"The server had an error\nplease retry \"later\"","type":"server_error","code":null}}`)},
				{name: "vLLM error object", check: failed, event: sseData(`{"object":"error","message":"bad \"input\"\n","type":"BadRequestError","param":null,"code":400}`)},
			},
		},
		{
			name: "openai_responses", path: "/v1/responses", contentType: "text/event-stream",
			events: []escapeEvent{
				{name: "output_text.delta", output: true, event: sseTyped("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"line\nbreak \"q\" caf\u00e9","logprobs":[],"obfuscation":"a\"b"}`)},
				{name: "function_call_arguments.delta", output: true, event: sseTyped("response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","sequence_number":9,"item_id":"fc_1","output_index":1,"delta":"{\"city\":"}`)},
				{name: "response.created echoing instructions", event: sseTyped("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_\"1\"","object":"response","created_at":1,"status":"in_progress","instructions":"Be brief.\nUse \"quotes\".","model":"gpt-4o\u002d2024","output":[],"usage":null}}`)},
				{name: "response.completed", check: usage, event: sseTyped("response.completed", `{"type":"response.completed","sequence_number":20,"response":{"id":"resp_\"1\"","object":"response","status":"completed","instructions":"Be brief.\nUse \"quotes\".","model":"gpt-4o\u002d2024","output":[{"type":"message","content":[{"type":"output_text","text":"line\nbreak \"q\""}]}],"usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":15}}}`)},
				{name: "response.completed with cache writes", check: func(m *Measurement) bool { return m.Usage.CacheCreationInputTokens == 43 }, event: sseData(`{"response":{"id":"resp_1","model":"openai.gpt-5.6-luna","object":"response","status":"completed","usage":{"input_tokens":158,"input_tokens_details":{"cache_write_tokens":43,"cached_tokens":0},"output_tokens":32,"output_tokens_details":{"reasoning_tokens":10},"total_tokens":190}},"sequence_number":25,"type":"response.completed"}` + "\nevent: response.completed")},
				{name: "a gateway's [DONE]", event: sseData(`[DONE]`)},
			},
		},
		{
			name: "anthropic_messages", path: "/v1/messages", contentType: "text/event-stream",
			warm: [][]byte{sseTyped("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}`)},
			events: []escapeEvent{
				{name: "message_start", event: sseTyped("message_start", `{"type":"message_start","message":{"id":"msg_\"1\"","type":"message","role":"assistant","model":"claude\u002dsonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":10,"cache_read_input_tokens":2,"output_tokens":1}}}`)},
				{name: "text_delta", output: true, event: sseTyped("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"line\nbreak \"q\" caf\u00e9"}}`)},
				{name: "thinking_delta", output: true, event: sseTyped("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm\n\"x\""}}`)},
				{name: "input_json_delta", output: true, event: sseTyped("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`)},
				{name: "message_delta", check: finished, event: sseTyped("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":"\n\n"},"usage":{"output_tokens":15}}`)},
				{name: "error", check: failed, event: sseTyped("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded \"now\"\n"}}`)},
			},
		},
		{
			name: "bedrock_converse", path: bedrockConversePath, contentType: bedrockMediaType,
			events: []escapeEvent{
				{name: "text delta", output: true, event: bedrockFrame("contentBlockDelta", []byte(`{"contentBlockIndex":0,"delta":{"text":"line\nbreak \"q\" caf\u00e9"},"p":"abcd"}`))},
				{name: "reasoning delta", output: true, event: bedrockFrame("contentBlockDelta", []byte(`{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"think\n\"hard\""}},"p":"x"}`))},
				{name: "tool input delta", output: true, event: bedrockFrame("contentBlockDelta", []byte(`{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"city\":"}},"p":"ab"}`))},
				{name: "messageStop", check: finished, event: bedrockFrame("messageStop", []byte(`{"stopReason":"end_turn","additionalModelResponseFields":{"note":"a\nb"},"p":"abc"}`))},
				{name: "metadata", check: usage, event: bedrockFrame("metadata", []byte(`{"usage":{"inputTokens":10,"outputTokens":5,"totalTokens":15,"cacheReadInputTokens":0},"metrics":{"latencyMs":120},"trace":{"note":"\"x\""},"p":"abc"}`))},
			},
		},
		{
			name: "bedrock_invoke Anthropic", path: bedrockInvokePath, contentType: bedrockMediaType,
			events: []escapeEvent{
				{name: "message_start", event: escapedChunk(`{"type":"message_start","message":{"id":"msg_\"1\"","model":"claude\u002dsonnet","usage":{"input_tokens":10,"output_tokens":1}}}`, false)},
				{name: "text_delta", output: true, event: escapedChunk(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"line\nbreak \"q\" caf\u00e9"}}`, false)},
				{name: "input_json_delta", output: true, event: escapedChunk(`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`, false)},
				{name: "base64 with escaped slashes", output: true, event: escapedChunk(slashNative, true)},
				{name: "message_delta", check: finished, event: escapedChunk(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":"\n"},"usage":{"output_tokens":15}}`, false)},
				{name: "message_stop with metrics", check: usage, event: escapedChunk(`{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":10,"outputTokenCount":15,"invocationLatency":900,"firstByteLatency":300}}`, false)},
			},
		},
		{
			name: "bedrock_invoke Llama", path: "/model/meta.llama3-1-8b-instruct-v1:0/invoke-with-response-stream", contentType: bedrockMediaType,
			events: []escapeEvent{
				{name: "generation", output: true, event: escapedChunk(`{"generation":"line\nbreak \"q\" caf\u00e9","prompt_token_count":null,"generation_token_count":3,"stop_reason":null}`, false)},
				{name: "last generation", output: true, check: finished, event: escapedChunk(`{"generation":"\n","prompt_token_count":null,"generation_token_count":4,"stop_reason":"stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":5,"outputTokenCount":4,"invocationLatency":100,"firstByteLatency":20}}`, false)},
			},
		},
		{
			name: "ollama", path: "/api/chat", contentType: "application/x-ndjson",
			events: []escapeEvent{
				{name: "content", output: true, event: ndjsonLine(`{"model":"llama3.2\u003alatest","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"line\nbreak \"q\" caf\u00e9"},"done":false}`)},
				{name: "thinking", output: true, event: ndjsonLine(`{"model":"llama3.2","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"","thinking":"hmm\n\"x\""},"done":false}`)},
				{name: "tool call", output: true, event: ndjsonLine(`{"model":"llama3.2","created_at":"2026-01-01T00:00:00Z","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"S\u00e3o \"Paulo\"\n"}}}]},"done":false}`)},
				{name: "generate response and thinking", output: true, event: ndjsonLine(`{"model":"llama3.2","created_at":"2026-01-01T00:00:00Z","response":"a\nb \"c\"","thinking":"\u00e9","done":false}`)},
				{name: "done", check: usage, event: ndjsonLine(`{"model":"llama3.2","created_at":"2026\u002d01-01T00:00:00Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,"total_duration":1000,"load_duration":10,"prompt_eval_count":5,"prompt_eval_duration":100,"eval_count":7,"eval_duration":500}`)},
				{name: "error", check: failed, event: ndjsonLine(`{"error":"model \"x\" not found\n"}`)},
			},
		},
		{
			name: "gemini", path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent", contentType: "text/event-stream",
			events: []escapeEvent{
				{name: "text", output: true, event: sseData(`{"candidates":[{"content":{"parts":[{"text":"line\nbreak, \"quoted\" caf\u00e9 \ud83d\ude00"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":12,"totalTokenCount":12},"modelVersion":"gemini-2.5-flash\u002d001","responseId":"Zk3a\"9"}`)},
				{name: "thought", output: true, event: sseData(`{"candidates":[{"content":{"parts":[{"text":"hmm\n\"x\"","thought":true}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash"}`)},
				{name: "function call", output: true, event: sseData(`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"get_weather","args":{"city":"S\u00e3o \"Paulo\"\n","days":[1,2]}},"thoughtSignature":"Cik\/Bcs+"}],"role":"model"},"index":0}]}`)},
				{name: "executable code", output: true, event: sseData(`{"candidates":[{"content":{"parts":[{"executableCode":{"language":"PYTHON","code":"print(\"hi\")\n"}}],"role":"model"},"index":0}]}`)},
				{name: "finish and usage", check: func(m *Measurement) bool { return usage(m) && finished(m) }, event: sseData(`{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":7,"totalTokenCount":19,"thoughtsTokenCount":3},"modelVersion":"gemini-2.5-flash"}`)},
				{name: "error", check: failed, event: sseData(`{"error":{"code":500,"message":"An \"internal\" error\n","status":"INTERNAL"}}`)},
			},
		},
		{
			name: "gemini array", path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent", contentType: "application/json",
			warm: [][]byte{[]byte(`[{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash"}`)},
			events: []escapeEvent{
				{name: "text element", output: true, event: []byte(`,` + "\r\n" + `{"candidates":[{"content":{"parts":[{"text":"line\nbreak \"q\" caf\u00e9"}],"role":"model"},"index":0}],"modelVersion":"gemini-2.5-flash"}`)},
				{name: "function call element", output: true, event: []byte(`,{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"q":"\"x\"\n"}}}],"role":"model"},"index":0}]}`)},
			},
		},
		{
			name: "cohere_chat", path: "/v2/chat", contentType: "text/event-stream",
			events: []escapeEvent{
				{name: "message-start", event: sseTyped("message-start", `{"id":"29f1\"4","type":"message-start","delta":{"message":{"role":"assistant","content":[],"tool_plan":"","tool_calls":[],"citations":[]}}}`)},
				{name: "content-delta", output: true, event: sseTyped("content-delta", `{"type":"content-delta","index":0,"delta":{"message":{"content":{"text":"line\nbreak \"q\" caf\u00e9"}}}}`)},
				{name: "thinking content-delta", output: true, event: sseTyped("content-delta", `{"type":"content-delta","index":0,"delta":{"message":{"content":{"thinking":"hmm\n\"x\""}}}}`)},
				{name: "tool-plan-delta", output: true, event: sseTyped("tool-plan-delta", `{"type":"tool-plan-delta","delta":{"message":{"tool_plan":"I will call\n\"weather\""}}}`)},
				{name: "tool-call-delta", output: true, event: sseTyped("tool-call-delta", `{"type":"tool-call-delta","index":0,"delta":{"message":{"tool_calls":{"function":{"arguments":"{\"city\":"}}}}}`)},
				{name: "message-end", check: usage, event: sseTyped("message-end", `{"type":"message-end","id":"29f1\"4","delta":{"finish_reason":"COMPLETE","usage":{"billed_units":{"input_tokens":5,"output_tokens":7},"tokens":{"input_tokens":10,"output_tokens":7},"cached_tokens":0}}}`)},
			},
		},
		{
			name: "tgi", path: "/generate_stream", contentType: "text/event-stream",
			events: []escapeEvent{
				{name: "token", output: true, event: sseData(`{"index":1,"token":{"id":198,"text":"\n\"","logprob":-0.1,"special":false},"generated_text":null,"details":null}`)},
				{name: "last token", output: true, check: usage, event: sseData(`{"index":3,"token":{"id":2,"text":"\u00e9","logprob":-0.1,"special":false},"generated_text":"line\nbreak \"q\" caf\u00e9","details":{"finish_reason":"eos_token","generated_tokens":3,"seed":null,"input_length":5}}`)},
				{name: "error", check: failed, event: sseData(`{"error":"Input validation error: \"inputs\" must be\nshorter","error_type":"validation"}`)},
			},
		},
	}
}

// escapeMeter is a Meter for d, warmed with its warm events.
func escapeMeter(t testing.TB, d escapeDialect) *Meter {
	info, ok := DialectForPath(d.path)
	if !ok {
		t.Fatalf("no dialect for %s", d.path)
	}
	mt := New(info.New(), Options{}, t0)
	mt.Request(d.path, []byte(`{"model":"m","stream":true}`), false)
	mt.Response(200, d.contentType, "")
	for _, w := range d.warm {
		mt.Write(w, t0.Add(step))
	}
	return mt
}

// TestEventAllocationsWithEscapes: once warm, reading an event allocates
// nothing even when every string in it has escapes.
func TestEventAllocationsWithEscapes(t *testing.T) {
	for _, d := range escapeDialects(t) {
		for _, ev := range d.events {
			t.Run(d.name+"/"+ev.name, func(t *testing.T) {
				mt := escapeMeter(t, d)
				// Warm: the first sight of an id or a model is copied.
				mt.Write(ev.event, t0.Add(step))
				before := mt.M.OutputEvents
				mt.Write(ev.event, t0.Add(step))
				if ev.output && mt.M.OutputEvents != before+1 {
					t.Fatalf("the event was not read as output: %+v", mt.M)
				}
				if ev.check != nil && !ev.check(&mt.M) {
					t.Fatalf("the event was not read: %+v", mt.M)
				}
				if mt.M.Degraded != 0 {
					t.Fatalf("degraded: %+v", mt.M)
				}
				allocs := testing.AllocsPerRun(200, func() {
					mt.Write(ev.event, t0.Add(step))
				})
				if allocs != 0 {
					t.Errorf("%v allocations per event, want 0:\n%s", allocs, ev.event)
				}
			})
		}
	}
}

// benchEscapeEvent is the per-event cost of one event of escapeDialects.
func benchEscapeEvent(b *testing.B, dialect, event string) {
	for _, d := range escapeDialects(b) {
		if d.name != dialect {
			continue
		}
		for _, ev := range d.events {
			if ev.name != event {
				continue
			}
			mt := escapeMeter(b, d)
			mt.Write(ev.event, t0.Add(step))
			b.SetBytes(int64(len(ev.event)))
			b.ReportAllocs()
			now := t0.Add(step)
			for b.Loop() {
				now = now.Add(time.Microsecond)
				mt.Write(ev.event, now)
			}
			return
		}
	}
	b.Fatalf("no event %s/%s", dialect, event)
}

// BenchmarkOpenAIChatEventEscapes is BenchmarkOpenAIChatEvent for a content
// delta with a newline, quotes and \u escapes in it.
func BenchmarkOpenAIChatEventEscapes(b *testing.B) {
	benchEscapeEvent(b, "openai_chat", "content")
}

// BenchmarkOpenAIChatToolCallEvent: a tool-call argument fragment, whose
// every string has escaped quotes.
func BenchmarkOpenAIChatToolCallEvent(b *testing.B) {
	benchEscapeEvent(b, "openai_chat", "tool-call argument fragment")
}
