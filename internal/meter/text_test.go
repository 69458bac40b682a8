package meter

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// toolText is one tool call as a text sink puts it together.
type toolText struct{ ID, Name, Args string }

// choiceText is what a text sink received for one choice.
type choiceText struct {
	Answer, Reasoning string
	Tools             []toolText
}

// textRecorder is a TextSink that puts the fragments back together the
// simplest way: text and reasoning concatenated, tool calls by item.
type textRecorder struct {
	choices map[int]*choiceText
	items   map[[2]int]int // (choice, item) -> index in Tools
	calls   int
}

func (r *textRecorder) Text(choice, item int, kind TextKind, raw string) {
	r.calls++
	if r.choices == nil {
		r.choices, r.items = map[int]*choiceText{}, map[[2]int]int{}
	}
	c := r.choices[choice]
	if c == nil {
		c = &choiceText{}
		r.choices[choice] = c
	}
	text := string(AppendText(nil, raw))
	switch kind {
	case TextAnswer:
		c.Answer += text
		return
	case TextReasoning:
		c.Reasoning += text
		return
	}
	i, ok := r.items[[2]int{choice, item}]
	if !ok {
		i = len(c.Tools)
		c.Tools = append(c.Tools, toolText{})
		r.items[[2]int{choice, item}] = i
	}
	switch kind {
	case TextToolCallID:
		c.Tools[i].ID = text
	case TextToolCallName:
		c.Tools[i].Name = text
	case TextToolCallArguments:
		c.Tools[i].Args += text
	}
}

// fixtureExchange says how a fixture is served: the request path that picks
// its dialect and the response's content type.
func fixtureExchange(file string) (path, contentType string) {
	dir, name := filepath.Base(filepath.Dir(file)), filepath.Base(file)
	switch dir {
	case "openai":
		path = "/v1/chat/completions"
	case "responses":
		path = "/v1/responses"
	case "anthropic":
		path = "/v1/messages"
	case "gemini":
		x := geminiExchangeFor(name)
		return x.path, x.contentType
	case "ollama":
		path = "/api/chat"
		if strings.HasPrefix(name, "generate") {
			path = "/api/generate"
		}
	case "cohere":
		path = "/v2/chat"
	case "tgi":
		path = "/generate_stream"
		if strings.HasSuffix(name, ".json") {
			path = "/generate"
		}
	case "bedrock":
		path = bedrockPathFor(file)
		if strings.HasSuffix(name, ".bin") {
			return path, bedrockMediaType
		}
	}
	return path, byExtension(file)[0]
}

// measureWithSink meters a fixture in one write, with sink as its text sink
// when it is not nil.
func measureWithSink(t *testing.T, file string, sink TextSink) Measurement {
	t.Helper()
	body, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	path, ct := fixtureExchange(file)
	status := 200
	if strings.HasPrefix(filepath.Base(file), "error_") {
		status = 429
	}
	mt := New(DetectDialect(path).New(), Options{}, t0)
	mt.SetTextSink(sink)
	mt.Request(path, []byte(`{"model":"m","stream":true}`), false)
	mt.Response(status, ct, "")
	mt.Write(body, t0.Add(step))
	return *mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
}

// TestTextSink checks that each dialect hands a text sink exactly the text
// it generated, streamed or whole, in every kind: answer, reasoning, tool
// calls with their ids, names and arguments, one choice or several.
func TestTextSink(t *testing.T) {
	tests := []struct {
		fixture string
		want    map[int]*choiceText
	}{
		{"openai/chat_usage.sse", map[int]*choiceText{0: {Answer: "Hello! How can I help you today?"}}},
		{"openai/chat_n2.sse", map[int]*choiceText{0: {Answer: "Red roses."}, 1: {Answer: "Blue skies."}}},
		{"openai/chat_tool_calls.sse", map[int]*choiceText{0: {Tools: []toolText{
			{"call_P9Ayqu3UQNYuTBVAg2sLimh9", "get_weather", `{"city":"Paris"}`},
			{"call_Q1", "get_weather", `{"city":"Rome"}`},
		}}}},
		{"openai/deepseek_reasoning.sse", map[int]*choiceText{0: {Reasoning: "We need to add two and two.", Answer: "2 + 2 = 4."}}},
		{"openai/compat_mistral_magistral.sse", map[int]*choiceText{0: {
			Reasoning: "The user is asking for 2+2. This is basic arithmetic. 2+2=4.", Answer: "2 + 2 = 4"}}},
		{"openai/compat_together_text_delta.sse", map[int]*choiceText{0: {Answer: "Hello! How can I help?"}}},
		{"openai/chat_completion.json", map[int]*choiceText{0: {
			Answer: "The image shows a wooden boardwalk path running through a lush green field or meadow."}}},
		{"openai/reasoning_hidden.sse", nil},
		{"openai/error_429.json", nil},
		{"responses/reasoning_summary.sse", map[int]*choiceText{0: {
			Reasoning: "**Analyzing the request**\n\nThe user asks for a prime number larger than 100.",
			Answer:    "101 is the smallest prime larger than 100."}}},
		{"responses/function_call.sse", map[int]*choiceText{0: {Tools: []toolText{
			{"call_5dp5Uj0Loqn1YcyIpqSq6sLX", "get_weather", `{ "location": "New York City, USA" }`}}}}},
		{"responses/custom_tool.sse", map[int]*choiceText{0: {Tools: []toolText{
			{"call_Qk7mZp2R9vL1xN4bT6cW8dYf", "code_exec", `print("hello world")`}}}}},
		{"responses/response_no_usage.json", map[int]*choiceText{0: {
			Answer: "1. Faster feedback.\n2. Lower cost.\n3. Better p95 latency.",
			Tools:  []toolText{{"call_local_1", "get_weather", `{"city":"Paris"}`}}}}},
		{"anthropic/thinking_text.sse", map[int]*choiceText{0: {
			Reasoning: "I need to count the letter 'r' in \"strawberry\".\ns-t-r-a-w-b-e-r-r-y: the r's are at positions 3, 8 and 9.\n\nSo there are 3.",
			Answer:    "The letter 'r' appears 3 times in the word \"strawberry\"."}}},
		{"anthropic/tool_use.sse", map[int]*choiceText{0: {
			Answer: "Certainly! I'll check the current weather in San Francisco for you. One moment.",
			Tools:  []toolText{{"toolu_014x5X91kx3fvdhpLvwXZWE2", "get_weather", `{"location": "San Francisco, CA", "unit": "fahrenheit"}`}}}}},
		{"anthropic/message_no_usage.json", map[int]*choiceText{0: {
			Answer: "Hello there, how are you?",
			Tools:  []toolText{{"toolu_local_1", "lookup", `{"q":"tokentap"}`}}}}},
		{"gemini/sse_two_candidates.sse", map[int]*choiceText{
			0: {Answer: "Roses are red, violets are blue."}, 1: {Answer: "The sky at dawn glows softly over"}}},
		{"gemini/sse_thinking.sse", map[int]*choiceText{0: {
			Reasoning: "**Weighing the greeting**\n\nThe user wants a short hello, so I will keep it brief.**Choosing the tone**\n\nFriendly and plain.",
			Answer:    "Hello there! It is nice to meet you. How can I help you today?"}}},
		{"gemini/sse_function_call.sse", map[int]*choiceText{0: {Tools: []toolText{{"", "getWeather", `{"location": "Tokyo"}`}}}}},
		{"gemini/array_text.json", map[int]*choiceText{0: {
			Answer: `Why did the gopher cross the road? To get to the "other" side of the [stack]} \o/`}}},
		{"gemini/body_generate_content.json", map[int]*choiceText{0: {
			Reasoning: "**Considering the question**\n\nThe user asks for a capital.", Answer: "The capital of France is Paris."}}},
		{"ollama/chat_tool_calls.ndjson", map[int]*choiceText{0: {
			Reasoning: "The user wants the weather in Paris.",
			Tools:     []toolText{{"call_trmym6vj", "get_current_weather", `{"format":"celsius","location":"Paris, FR"}`}}}}},
		{"ollama/generate_thinking.ndjson", map[int]*choiceText{0: {Reasoning: "Hmm, simple", Answer: "Yes."}}},
		{"ollama/chat_nonstream.json", map[int]*choiceText{0: {Answer: "The sky is blue because of Rayleigh scattering."}}},
		{"cohere/tool_call.sse", map[int]*choiceText{0: {
			Reasoning: "I will use the weather tool.",
			Tools:     []toolText{{"weather_e8p4pn45zt0t", "weather", `{"location": "San Francisco"}`}}}}},
		{"cohere/chat.json", map[int]*choiceText{0: {Answer: "The capital of France is Paris."}}},
		{"tgi/generate_stream.sse", map[int]*choiceText{0: {Answer: " Deep Learning is a subset of machine learning ."}}},
		{"tgi/generate.json", map[int]*choiceText{0: {Answer: " Deep learning is a subset of machine learning."}}},
		{"bedrock/converse_reasoning_tool.bin", map[int]*choiceText{0: {
			Reasoning: "The user wants the weather in Paris; I should call the tool.",
			Answer:    "Let me check the weather.",
			Tools:     []toolText{{"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "get_weather", `{"city": "Paris", "unit": "celsius"}`}}}}},
		{"bedrock/converse_tool.json", map[int]*choiceText{0: {
			Tools: []toolText{{"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "get_weather", `{"city":"Paris","unit":"celsius"}`}}}}},
		{"bedrock/invoke_anthropic_thinking_tools.bin", map[int]*choiceText{0: {
			Reasoning: "I need the weather tool",
			Tools:     []toolText{{"toolu_bdrk_014x5X91", "get_weather", `{"city": "Paris"}`}}}}},
		{"bedrock/invoke_llama.json", map[int]*choiceText{0: {Answer: " Hi there, how are you?"}}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			var rec textRecorder
			measureWithSink(t, filepath.Join("testdata", tt.fixture), &rec)
			if !reflect.DeepEqual(rec.choices, tt.want) {
				t.Errorf("got:")
				for i, c := range rec.choices {
					t.Errorf("  %d: %+v", i, *c)
				}
				t.Errorf("want:")
				for i, c := range tt.want {
					t.Errorf("  %d: %+v", i, *c)
				}
			}
		})
	}
}

// TestTextSinkChangesNoMeasurement: on every fixture of every dialect, a
// meter with a text sink measures exactly what one without measures, so
// turning content capture on cannot change a count or a time.
func TestTextSinkChangesNoMeasurement(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*", "*"))
	n := 0
	for _, f := range files {
		switch filepath.Ext(f) {
		case ".sse", ".json", ".ndjson", ".bin":
		default:
			continue
		}
		n++
		var rec textRecorder
		without := measureWithSink(t, f, nil)
		with := measureWithSink(t, f, &rec)
		if !reflect.DeepEqual(with, without) {
			t.Errorf("%s: the text sink changed the measurement:\nwith    %+v\nwithout %+v", f, with, without)
		}
		if with.Usage.OutputTokens > 0 && with.StatusCode < 400 && with.OutputEvents > 0 && rec.calls == 0 {
			t.Errorf("%s: output was measured but the sink received no text", f)
		}
	}
	if n < 100 {
		t.Fatalf("only %d fixtures found", n)
	}
}

// textFuzzExchanges are the exchanges FuzzTextSink picks from: every
// dialect, streamed in its framing and whole.
var textFuzzExchanges = []struct{ path, contentType string }{
	{"/v1/chat/completions", "text/event-stream"},
	{"/v1/chat/completions", "application/json"},
	{"/v1/responses", "text/event-stream"},
	{"/v1/responses", "application/json"},
	{"/v1/messages", "text/event-stream"},
	{"/v1/messages", "application/json"},
	{"/v1beta/models/m:streamGenerateContent", "text/event-stream"},
	{"/v1beta/models/m:streamGenerateContent", "application/json"},
	{"/v1beta/models/m:generateContent", "application/json"},
	{"/api/chat", "application/x-ndjson"},
	{"/api/generate", "application/json"},
	{"/v2/chat", "text/event-stream"},
	{"/v2/chat", "application/json"},
	{"/generate_stream", "text/event-stream"},
	{"/generate", "application/json"},
	{"/model/m/converse-stream", bedrockMediaType},
	{"/model/m/converse", "application/json"},
	{"/model/m/invoke-with-response-stream", bedrockMediaType},
	{"/model/m/invoke", "application/json"},
}

// FuzzTextSink: on any input, in any dialect, handing the text to a sink
// never panics and never changes the measurement, and what the sink gets
// for a tool call item or a choice stays within the bounds the meter
// keeps.
func FuzzTextSink(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*", "*"))
	for i, file := range files {
		if b, err := os.ReadFile(file); err == nil && len(b) < 16<<10 {
			f.Add(b, uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, pick uint8) {
		x := textFuzzExchanges[int(pick)%len(textFuzzExchanges)]
		run := func(sink TextSink) Measurement {
			mt := New(DetectDialect(x.path).New(), Options{MaxEventSize: 4096}, t0)
			mt.SetTextSink(sink)
			mt.Request(x.path, data, false)
			mt.Response(200, x.contentType, "")
			mt.Write(data, t0.Add(step))
			return *mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
		}
		var rec boundsSink
		with, without := run(&rec), run(nil)
		if !reflect.DeepEqual(with, without) {
			t.Fatalf("the sink changed the measurement:\nwith    %+v\nwithout %+v", with, without)
		}
		if rec.bad != "" {
			t.Fatal(rec.bad)
		}
	})
}

// boundsSink checks what it is given: choices within the meter's bound,
// kinds it knows, fragments that are JSON values as written.
type boundsSink struct{ bad string }

func (b *boundsSink) Text(choice, _ int, kind TextKind, raw string) {
	switch {
	case b.bad != "":
	case choice < 0 || choice >= maxChoices:
		b.bad = "choice out of bounds"
	case kind > TextToolCallArguments:
		b.bad = "unknown kind"
	case raw == "" || rawKindOf(raw) == kindInvalid:
		b.bad = "a fragment that is not a JSON value: " + raw
	}
}
