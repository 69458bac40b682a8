package capture

import (
	"encoding/json"
	"testing"
)

// TestInput reads one request of each API, with every kind of content it
// can carry, into the conventions' JSON.
func TestInput(t *testing.T) {
	tests := []struct {
		name, dialect, body string
		system, input       string
	}{
		{
			name:    "openai chat: system, content parts, tool calls and results, refusal, reasoning",
			dialect: "openai_chat",
			body: `{"model":"gpt-4o","messages":[
				{"role":"system","content":"Be brief."},
				{"role":"user","name":"ann","content":[{"type":"text","text":"What is in this image?"},{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"low"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBOR"}}]},
				{"role":"assistant","content":null,"reasoning_content":"Look first.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"look","arguments":"{\"zoom\":2}"}},{"id":"call_2","type":"function","function":{"name":"broken","arguments":"{\"zoom\":"}}]},
				{"role":"tool","tool_call_id":"call_1","content":"A cat."},
				{"role":"assistant","content":"","refusal":"I can't say more."},
				{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGR","format":"wav"}},{"type":"file","file":{"file_id":"file-9"}}]}
			]}`,
			input: `[{"role":"system","parts":[{"type":"text","content":"Be brief."}]},` +
				`{"role":"user","name":"ann","parts":[{"type":"text","content":"What is in this image?"},{"type":"uri","modality":"image","uri":"https://example.com/a.png"},{"type":"blob","modality":"image","mime_type":"image/png","content":"iVBOR"}]},` +
				`{"role":"assistant","parts":[{"type":"reasoning","content":"Look first."},{"type":"tool_call","id":"call_1","name":"look","arguments":{"zoom":2}},{"type":"tool_call","id":"call_2","name":"broken","arguments":"{\"zoom\":"}]},` +
				`{"role":"tool","parts":[{"type":"tool_call_response","id":"call_1","response":"A cat."}]},` +
				`{"role":"assistant","parts":[{"type":"text","content":"I can't say more."}]},` +
				`{"role":"user","parts":[{"type":"blob","modality":"audio","mime_type":"audio/wav","content":"UklGR"},{"type":"file","modality":"document","file_id":"file-9"}]}]`,
		},
		{
			name:    "openai legacy completions prompt",
			dialect: "openai_chat",
			body:    `{"model":"gpt-3.5-turbo-instruct","prompt":["Say ","hi"]}`,
			input:   `[{"role":"user","parts":[{"type":"text","content":"Say "},{"type":"text","content":"hi"}]}]`,
		},
		{
			name:    "openai embeddings have no messages",
			dialect: "openai_chat",
			body:    `{"model":"text-embedding-3-small","input":"hello"}`,
		},
		{
			name:    "responses: instructions, string input",
			dialect: "openai_responses",
			body:    `{"model":"gpt-5","instructions":"Answer in French.","input":"Hello"}`,
			system:  `[{"type":"text","content":"Answer in French."}]`,
			input:   `[{"role":"user","parts":[{"type":"text","content":"Hello"}]}]`,
		},
		{
			name:    "responses: items",
			dialect: "openai_responses",
			body: `{"input":[
				{"role":"developer","content":"Use tools."},
				{"type":"message","role":"user","content":[{"type":"input_text","text":"Weather?"},{"type":"input_image","image_url":"https://example.com/sky.jpg"},{"type":"input_image","file_id":"file-1"},{"type":"input_file","file_url":"https://example.com/r.pdf"}]},
				{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Need a tool."}]},
				{"type":"function_call","call_id":"call_9","name":"weather","arguments":"{\"city\":\"Oslo\"}"},
				{"type":"function_call_output","call_id":"call_9","output":"{\"temp\":3}"},
				{"type":"item_reference","id":"msg_1"}
			]}`,
			input: `[{"role":"developer","parts":[{"type":"text","content":"Use tools."}]},` +
				`{"role":"user","parts":[{"type":"text","content":"Weather?"},{"type":"uri","modality":"image","uri":"https://example.com/sky.jpg"},{"type":"file","modality":"image","file_id":"file-1"},{"type":"uri","modality":"document","uri":"https://example.com/r.pdf"}]},` +
				`{"role":"assistant","parts":[{"type":"reasoning","content":"Need a tool."}]},` +
				`{"role":"assistant","parts":[{"type":"tool_call","id":"call_9","name":"weather","arguments":{"city":"Oslo"}}]},` +
				`{"role":"tool","parts":[{"type":"tool_call_response","id":"call_9","response":{"temp":3}}]}]`,
		},
		{
			name:    "anthropic: system blocks, images, tool use and result, thinking",
			dialect: "anthropic_messages",
			body: `{"model":"claude-sonnet-4-5","system":[{"type":"text","text":"You are terse."},{"type":"text","text":"Cite sources."}],"messages":[
				{"role":"user","content":[{"type":"text","text":"Describe"},{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/4AAQ"}},{"type":"document","source":{"type":"url","url":"https://example.com/a.pdf"}}]},
				{"role":"assistant","content":[{"type":"thinking","thinking":"Check the doc.","signature":"sig"},{"type":"redacted_thinking","data":"xx"},{"type":"tool_use","id":"toolu_1","name":"fetch","input":{"url":"https://example.com"}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"fetched"}]}]},
				{"role":"assistant","content":"Done."}
			]}`,
			system: `[{"type":"text","content":"You are terse."},{"type":"text","content":"Cite sources."}]`,
			input: `[{"role":"user","parts":[{"type":"text","content":"Describe"},{"type":"blob","modality":"image","mime_type":"image/jpeg","content":"/9j/4AAQ"},{"type":"uri","modality":"document","uri":"https://example.com/a.pdf"}]},` +
				`{"role":"assistant","parts":[{"type":"reasoning","content":"Check the doc."},{"type":"tool_call","id":"toolu_1","name":"fetch","arguments":{"url":"https://example.com"}}]},` +
				`{"role":"user","parts":[{"type":"tool_call_response","id":"toolu_1","response":"fetched"}]},` +
				`{"role":"assistant","parts":[{"type":"text","content":"Done."}]}]`,
		},
		{
			name:    "gemini: systemInstruction, model role, function call and response, inline data",
			dialect: "gemini",
			body: `{"systemInstruction":{"parts":[{"text":"Be kind."}]},"contents":[
				{"role":"user","parts":[{"text":"Where?"},{"inlineData":{"mimeType":"image/png","data":"AAAA"}},{"fileData":{"mimeType":"video/mp4","fileUri":"gs://b/v.mp4"}}]},
				{"role":"model","parts":[{"text":"Thinking.","thought":true},{"functionCall":{"name":"locate","args":{"q":"here"}}}]},
				{"role":"function","parts":[{"functionResponse":{"name":"locate","response":{"place":"Rome"}}}]},
				{"parts":[{"text":"Thanks"}]}
			]}`,
			system: `[{"type":"text","content":"Be kind."}]`,
			input: `[{"role":"user","parts":[{"type":"text","content":"Where?"},{"type":"blob","modality":"image","mime_type":"image/png","content":"AAAA"},{"type":"uri","modality":"video","mime_type":"video/mp4","uri":"gs://b/v.mp4"}]},` +
				`{"role":"assistant","parts":[{"type":"reasoning","content":"Thinking."},{"type":"tool_call","name":"locate","arguments":{"q":"here"}}]},` +
				`{"role":"tool","parts":[{"type":"tool_call_response","id":"locate","response":{"place":"Rome"}}]},` +
				`{"role":"user","parts":[{"type":"text","content":"Thanks"}]}]`,
		},
		{
			name:    "gemini: snake_case proto names",
			dialect: "gemini",
			body:    `{"system_instruction":{"parts":[{"text":"S"}]},"contents":[{"role":"user","parts":[{"inline_data":{"mime_type":"audio/ogg","data":"T2dn"}}]}]}`,
			system:  `[{"type":"text","content":"S"}]`,
			input:   `[{"role":"user","parts":[{"type":"blob","modality":"audio","mime_type":"audio/ogg","content":"T2dn"}]}]`,
		},
		{
			name:    "ollama chat: thinking, images, tool calls, tool answer",
			dialect: "ollama",
			body: `{"model":"qwen3","messages":[
				{"role":"user","content":"Weather in Paris?","images":["iVBOR"]},
				{"role":"assistant","content":"","thinking":"Use the tool.","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},
				{"role":"tool","tool_name":"get_weather","content":"11 degrees"}
			]}`,
			input: `[{"role":"user","parts":[{"type":"text","content":"Weather in Paris?"},{"type":"blob","modality":"image","content":"iVBOR"}]},` +
				`{"role":"assistant","parts":[{"type":"reasoning","content":"Use the tool."},{"type":"tool_call","name":"get_weather","arguments":{"city":"Paris"}}]},` +
				`{"role":"tool","parts":[{"type":"tool_call_response","id":"get_weather","response":"11 degrees"}]}]`,
		},
		{
			name:    "ollama generate: system and prompt",
			dialect: "ollama",
			body:    `{"model":"llama3","system":"Rhyme.","prompt":"Why is the sky blue?"}`,
			system:  `[{"type":"text","content":"Rhyme."}]`,
			input:   `[{"role":"user","parts":[{"type":"text","content":"Why is the sky blue?"}]}]`,
		},
		{
			name:    "cohere: system, tool plan and calls, tool result documents",
			dialect: "cohere_chat",
			body: `{"model":"command-a","messages":[
				{"role":"system","content":"Be exact."},
				{"role":"user","content":[{"type":"text","text":"Weather?"}]},
				{"role":"assistant","tool_plan":"Call weather.","tool_calls":[{"id":"w_1","type":"function","function":{"name":"weather","arguments":"{\"location\":\"SF\"}"}}]},
				{"role":"tool","tool_call_id":"w_1","content":[{"type":"document","document":{"data":"{\"temp\":60}"}}]}
			]}`,
			input: `[{"role":"system","parts":[{"type":"text","content":"Be exact."}]},` +
				`{"role":"user","parts":[{"type":"text","content":"Weather?"}]},` +
				`{"role":"assistant","parts":[{"type":"reasoning","content":"Call weather."},{"type":"tool_call","id":"w_1","name":"weather","arguments":{"location":"SF"}}]},` +
				`{"role":"tool","parts":[{"type":"tool_call_response","id":"w_1","response":{"data":"{\"temp\":60}"}}]}]`,
		},
		{
			name:    "tgi inputs",
			dialect: "tgi",
			body:    `{"inputs":"What is Deep Learning?","parameters":{"max_new_tokens":20}}`,
			input:   `[{"role":"user","parts":[{"type":"text","content":"What is Deep Learning?"}]}]`,
		},
		{
			name:    "bedrock converse: system, image, tool use and result, reasoning",
			dialect: "bedrock_converse",
			body: `{"system":[{"text":"Be brief."},{"cachePoint":{"type":"default"}}],"messages":[
				{"role":"user","content":[{"text":"Weather?"},{"image":{"format":"png","source":{"bytes":"iVBOR"}}}]},
				{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":"Need the tool.","signature":"s"}}},{"toolUse":{"toolUseId":"tu_1","name":"weather","input":{"city":"Paris"}}}]},
				{"role":"user","content":[{"toolResult":{"toolUseId":"tu_1","content":[{"json":{"temp":11}}]}}]}
			]}`,
			system: `[{"type":"text","content":"Be brief."}]`,
			input: `[{"role":"user","parts":[{"type":"text","content":"Weather?"},{"type":"blob","modality":"image","mime_type":"png","content":"iVBOR"}]},` +
				`{"role":"assistant","parts":[{"type":"reasoning","content":"Need the tool."},{"type":"tool_call","id":"tu_1","name":"weather","arguments":{"city":"Paris"}}]},` +
				`{"role":"user","parts":[{"type":"tool_call_response","id":"tu_1","response":{"temp":11}}]}]`,
		},
		{
			name:    "bedrock invoke: Claude's own format",
			dialect: "bedrock_invoke",
			body:    `{"anthropic_version":"bedrock-2023-05-31","max_tokens":100,"system":"Short.","messages":[{"role":"user","content":"Hi"}]}`,
			system:  `[{"type":"text","content":"Short."}]`,
			input:   `[{"role":"user","parts":[{"type":"text","content":"Hi"}]}]`,
		},
		{
			name:    "bedrock invoke: Llama prompt",
			dialect: "bedrock_invoke",
			body:    `{"prompt":"<s>[INST] Hi [/INST]","max_gen_len":64}`,
			input:   `[{"role":"user","parts":[{"type":"text","content":"<s>[INST] Hi [/INST]"}]}]`,
		},
		{name: "not JSON", dialect: "openai_chat", body: `model=gpt-4o`},
		{name: "unknown dialect", dialect: "klingon", body: `{"messages":[{"role":"user","content":"hi"}]}`},
		{
			name:    "escapes, non-ASCII and invalid UTF-8 come out as valid JSON",
			dialect: "openai_chat",
			body:    "{\"messages\":[{\"role\":\"user\",\"content\":\"tab\\there \\\"q\\\" \\u2028 caf\\u00e9 <b>&amp;</b> \xff end\"}]}",
			input:   "[{\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"content\":\"tab\\there \\\"q\\\" \\u2028 café <b>&amp;</b> \uFFFD end\"}]}]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			system, input := Input(tt.dialect, []byte(tt.body), DefaultMaxSize)
			checkResult(t, "system", system, Result{JSON: tt.system})
			checkResult(t, "input", input, Result{JSON: tt.input})
		})
	}
}

// checkResult compares a result with the one wanted, and checks that any
// JSON is valid.
func checkResult(t *testing.T, what string, got, want Result) {
	t.Helper()
	if got != want {
		t.Errorf("%s:\n got %s (truncated %v)\nwant %s (truncated %v)", what, got.JSON, got.Truncated, want.JSON, want.Truncated)
	}
	if got.JSON != "" && !json.Valid([]byte(got.JSON)) {
		t.Errorf("%s is not valid JSON: %s", what, got.JSON)
	}
}

// TestInputTruncatedBody: a body cut off by the proxy's copy cap yields
// the messages that arrived whole.
func TestInputTruncatedBody(t *testing.T) {
	body := `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"And then the rest of a very long quest`
	_, input := Input("openai_chat", []byte(body), DefaultMaxSize)
	want := `[{"role":"system","parts":[{"type":"text","content":"Be brief."}]}]`
	if input.JSON != want {
		t.Errorf("got %s, want %s", input.JSON, want)
	}
}
