package capture

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/meter"
)

// meterFixture runs one of the meter's fixtures through a Meter whose
// text sink is out, and returns the measurement.
func meterFixture(t *testing.T, fixture, path, contentType string, out *Output) *meter.Measurement {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("..", "meter", "testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	mt := meter.New(meter.DetectDialect(path).New(), meter.Options{}, start)
	mt.SetTextSink(out)
	mt.Request(path, []byte(`{"stream":true}`), false)
	mt.Response(200, contentType, "")
	mt.Write(body, start.Add(time.Millisecond))
	return mt.Finish(start.Add(2*time.Millisecond), meter.OutcomeUnknown, "")
}

// TestOutput puts real streams and bodies back together as output
// messages: one per choice, parts in the order generated, tool calls with
// their arguments as JSON, the finish reason of each choice.
func TestOutput(t *testing.T) {
	tests := []struct {
		name, fixture, path, contentType string
		want                             string
	}{
		{
			name: "openai: two parallel tool calls", fixture: "openai/chat_tool_calls.sse", path: "/v1/chat/completions", contentType: "text/event-stream",
			want: `[{"role":"assistant","parts":[{"type":"tool_call","id":"call_P9Ayqu3UQNYuTBVAg2sLimh9","name":"get_weather","arguments":{"city":"Paris"}},` +
				`{"type":"tool_call","id":"call_Q1","name":"get_weather","arguments":{"city":"Rome"}}],"finish_reason":"tool_calls"}]`,
		},
		{
			name: "openai: n=2, one message per choice", fixture: "openai/chat_n2.sse", path: "/v1/chat/completions", contentType: "text/event-stream",
			want: `[{"role":"assistant","parts":[{"type":"text","content":"Red roses."}],"finish_reason":"stop"},` +
				`{"role":"assistant","parts":[{"type":"text","content":"Blue skies."}],"finish_reason":"length"}]`,
		},
		{
			name: "openai: whole body", fixture: "openai/chat_completion.json", path: "/v1/chat/completions", contentType: "application/json",
			want: `[{"role":"assistant","parts":[{"type":"text","content":"The image shows a wooden boardwalk path running through a lush green field or meadow."}],"finish_reason":"stop"}]`,
		},
		{
			name: "anthropic: thinking, then text", fixture: "anthropic/thinking_text.sse", path: "/v1/messages", contentType: "text/event-stream",
			want: `[{"role":"assistant","parts":[{"type":"reasoning","content":"I need to count the letter 'r' in \"strawberry\".\ns-t-r-a-w-b-e-r-r-y: the r's are at positions 3, 8 and 9.\n\nSo there are 3."},` +
				`{"type":"text","content":"The letter 'r' appears 3 times in the word \"strawberry\"."}],"finish_reason":"end_turn"}]`,
		},
		{
			name: "anthropic: text, then a tool call", fixture: "anthropic/tool_use.sse", path: "/v1/messages", contentType: "text/event-stream",
			want: `[{"role":"assistant","parts":[{"type":"text","content":"Certainly! I'll check the current weather in San Francisco for you. One moment."},` +
				`{"type":"tool_call","id":"toolu_014x5X91kx3fvdhpLvwXZWE2","name":"get_weather","arguments":{"location": "San Francisco, CA", "unit": "fahrenheit"}}],"finish_reason":"tool_use"}]`,
		},
		{
			name: "responses: reasoning summary, then text", fixture: "responses/reasoning_summary.sse", path: "/v1/responses", contentType: "text/event-stream",
			want: `[{"role":"assistant","parts":[{"type":"reasoning","content":"**Analyzing the request**\n\nThe user asks for a prime number larger than 100."},` +
				`{"type":"text","content":"101 is the smallest prime larger than 100."}],"finish_reason":"stop"}]`,
		},
		{
			name: "gemini: two candidates", fixture: "gemini/sse_two_candidates.sse",
			path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent", contentType: "text/event-stream",
			want: `[{"role":"assistant","parts":[{"type":"text","content":"Roses are red, violets are blue."}],"finish_reason":"STOP"},` +
				`{"role":"assistant","parts":[{"type":"text","content":"The sky at dawn glows softly over"}],"finish_reason":"MAX_TOKENS"}]`,
		},
		{
			name: "ollama: thinking, then a whole tool call", fixture: "ollama/chat_tool_calls.ndjson", path: "/api/chat", contentType: "application/x-ndjson",
			want: `[{"role":"assistant","parts":[{"type":"reasoning","content":"The user wants the weather in Paris."},` +
				`{"type":"tool_call","id":"call_trmym6vj","name":"get_current_weather","arguments":{"format":"celsius","location":"Paris, FR"}}],"finish_reason":"stop"}]`,
		},
		{
			name: "truncated stream: no finish reason is an error", fixture: "openai/chat_truncated.sse", path: "/v1/chat/completions", contentType: "text/event-stream",
			want: `[{"role":"assistant","parts":[{"type":"text","content":"Once upon a time"}],"finish_reason":"error"}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := NewOutput(DefaultMaxSize)
			m := meterFixture(t, tt.fixture, tt.path, tt.contentType, out)
			got := out.Result(m.FinishReasons, m.Outcome == meter.OutcomeCompleted, DefaultMaxSize)
			checkResult(t, "output", got, Result{JSON: tt.want})
		})
	}
}

// TestOutputBound: however long the stream, the text kept stays within the
// bound, its start is kept, and the result says it was cut; a stream of
// ever new parts is bounded too.
func TestOutputBound(t *testing.T) {
	const max = 300
	out := NewOutput(max)
	for range 10000 {
		out.Text(0, 0, meter.TextAnswer, `"word \"quoted\" and more "`)
	}
	if n := len(out.choices[0][0].Content); n > max {
		t.Errorf("kept %d bytes with a bound of %d", n, max)
	}
	got := out.Result([]string{"stop"}, true, max)
	if !got.Truncated || len(got.JSON) > max {
		t.Errorf("result %d bytes, truncated %v: %s", len(got.JSON), got.Truncated, got.JSON)
	}
	if !strings.HasPrefix(got.JSON, `[{"role":"assistant","parts":[{"type":"text","content":"word \"quoted\" and more word`) {
		t.Errorf("the start of the text is not kept: %s", got.JSON)
	}

	out = NewOutput(max)
	for i := range 10000 {
		out.Text(0, 0, meter.TextAnswer, `"a"`)
		out.Text(0, i, meter.TextToolCallName, `"tool"`)
		out.Text(1, 0, meter.TextReasoning, `"b"`)
	}
	parts := 0
	for _, ps := range out.choices {
		parts += len(ps)
	}
	if out.used > max || parts > max/partCost {
		t.Errorf("kept %d parts, %d bytes counted, with a bound of %d", parts, out.used, max)
	}
	if !out.truncated {
		t.Error("not marked as cut")
	}
}

// TestOutputRepeatedCallFields: servers that repeat a call's id and name
// in every delta still make one call; a new id at the same index is the
// next call.
func TestOutputRepeatedCallFields(t *testing.T) {
	out := NewOutput(DefaultMaxSize)
	for _, args := range []string{`"{\"a\""`, `":1}"`} {
		out.Text(0, 0, meter.TextToolCallID, `"call_1"`)
		out.Text(0, 0, meter.TextToolCallName, `"f"`)
		out.Text(0, 0, meter.TextToolCallArguments, args)
	}
	out.Text(0, 0, meter.TextToolCallID, `"call_2"`)
	out.Text(0, 0, meter.TextToolCallName, `"g"`)
	out.Text(0, 0, meter.TextToolCallArguments, `"{}"`)
	got := out.Result(nil, true, DefaultMaxSize)
	want := `[{"role":"assistant","parts":[{"type":"tool_call","id":"call_1","name":"f","arguments":{"a":1}},{"type":"tool_call","id":"call_2","name":"g","arguments":{}}],"finish_reason":"stop"}]`
	checkResult(t, "output", got, Result{JSON: want})
}

// TestOutputNothing: an exchange that generated nothing and finished no
// choice has no output attribute.
func TestOutputNothing(t *testing.T) {
	if got := NewOutput(0).Result(nil, true, 0); got != (Result{}) {
		t.Errorf("got %+v", got)
	}
}
