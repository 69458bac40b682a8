package meter

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	aws "github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/tidwall/gjson"

	"github.com/tokentap/tokentap/sse"
)

// claudeEvent is one of Claude's streamed events: its SSE event name and
// its JSON, which InvokeModel sends base64 in a chunk's bytes.
type claudeEvent struct{ name, data string }

// claudeStream is a named list of Claude's events; usage, when set, is
// what both dialects must report for it.
type claudeStream struct {
	name   string
	events []claudeEvent
	usage  *Usage
}

// TestBedrockInvokeMeasuresClaudeAsAnthropic serves the same Claude
// events and Messages through the Messages API and through Bedrock's
// InvokeModel: every Anthropic recording and fixture, the Claude events of
// every InvokeModel fixture, and the cases below. Each pair of
// measurements must be equal field by field, but for what is Bedrock's
// own (the dialect's name, the framed bytes, the server timings of its
// invocation metrics), and a text sink must receive the same fragments.
func TestBedrockInvokeMeasuresClaudeAsAnthropic(t *testing.T) {
	streams := []claudeStream{
		{
			name: "message_start's thinking_tokens are as much a placeholder as its output_tokens: cut before message_delta, reasoning is unknown",
			events: []claudeEvent{
				{"message_start", `{"type":"message_start","message":{"id":"msg_01Pl","type":"message","role":"assistant","model":"claude-opus-5","content":[],"stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1,"output_tokens_details":{"thinking_tokens":0}}}}`},
				{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`},
				{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The user wants a haiku."}}`},
			},
			usage: &Usage{12, 6, -1, -1, -1, UsageEstimated},
		},
		{
			name: "text already in content_block_start, a tool named in its start, its input whole there (compatible servers)",
			events: []claudeEvent{
				{"message_start", `{"type":"message_start","message":{"id":"msg_01Cs","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":30,"output_tokens":1}}}`},
				{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Checking the weather."}}`},
				{"content_block_stop", `{"type":"content_block_stop","index":0}`},
				{"content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"city":"Paris"}}}`},
				{"content_block_stop", `{"type":"content_block_stop","index":1}`},
				{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":25}}`},
				{"message_stop", `{"type":"message_stop"}`},
			},
			usage: &Usage{30, 25, -1, -1, -1, UsageReported},
		},
	}
	for _, dir := range []string{"anthropic", filepath.Join("recorded", "anthropic")} {
		files, err := filepath.Glob(filepath.Join("testdata", dir, "*.sse"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			name := filepath.Join(dir, filepath.Base(f))
			streams = append(streams, claudeStream{name: name, events: sseClaudeEvents(t, testdata(t, dir, filepath.Base(f)))})
		}
	}
	fixtures := bedrockFixtures()
	for _, name := range slices.Sorted(maps.Keys(fixtures)) {
		if events := fixtures[name].claudeEvents(t); events != nil {
			streams = append(streams, claudeStream{name: filepath.Join("bedrock", name), events: events})
		}
	}
	for _, tt := range streams {
		t.Run(tt.name, func(t *testing.T) {
			var sseStream, chunks [][]byte
			for i, ev := range tt.events {
				sseStream = append(sseStream, []byte("event: "+ev.name+"\ndata: "+strings.ReplaceAll(ev.data, "\n", "\ndata: ")+"\n\n"))
				chunks = append(chunks, encodeBedrockMessage(t, bedrockChunk(ev.data, i)))
			}
			var messagesText, invokeText rawTextRecorder
			mt := exchange{200, "text/event-stream", ""}.start(newAnthropicMessages(), Options{}, nil)
			mt.SetTextSink(&messagesText)
			messages := replayPieces(mt, sseStream)
			mt = exchange{200, bedrockMediaType, ""}.start(newBedrock(true), Options{}, nil)
			mt.SetTextSink(&invokeText)
			invoke := replayPieces(mt, chunks)
			checkSameClaude(t, messages, invoke, messagesText, invokeText)
			// Equal, and not for having read nothing.
			if messages.Chunks != int64(len(tt.events)) || messages.OutputEvents > 0 && len(messagesText) == 0 {
				t.Errorf("%d chunks of %d events, %d output events, %d fragments of text", messages.Chunks, len(tt.events), messages.OutputEvents, len(messagesText))
			}
			if tt.usage != nil && messages.Usage != *tt.usage {
				t.Errorf("Usage = %+v, want %+v", messages.Usage, *tt.usage)
			}
		})
	}

	bodies := []struct{ name, body string }{
		{
			// A raw control character is invalid inside a JSON string,
			// but a broken upstream can send one: the estimate that
			// steps over it counts the space before it as a token.
			name: "a raw control character after a space in the text",
			body: `{"id":"msg_01Ct","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[{"type":"text","text":"Hello ` + "\x01" + `world"}],"stop_reason":"end_turn","usage":{"input_tokens":8,"output_tokens":3}}`,
		},
	}
	for _, pattern := range []string{"anthropic/*.json", "recorded/anthropic/*.json", "bedrock/invoke_anthropic*.json"} {
		files, err := filepath.Glob(filepath.Join("testdata", pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			dir, file := filepath.Split(strings.TrimPrefix(f, "testdata"+string(filepath.Separator)))
			bodies = append(bodies, struct{ name, body string }{filepath.Join(dir, file), string(testdata(t, dir, file))})
		}
	}
	for _, tt := range bodies {
		t.Run(tt.name, func(t *testing.T) {
			var messagesText, invokeText rawTextRecorder
			mt := exchange{200, "application/json", ""}.start(newAnthropicMessages(), Options{}, nil)
			mt.SetTextSink(&messagesText)
			messages := readInPieces(mt, []byte(tt.body), 64)
			mt = exchange{200, "application/json", ""}.start(newBedrock(true), Options{}, nil)
			mt.SetTextSink(&invokeText)
			invoke := readInPieces(mt, []byte(tt.body), 64)
			checkSameClaude(t, messages, invoke, messagesText, invokeText)
		})
	}
}

// checkSameClaude compares the measurements of the same Claude exchange
// read by the two dialects, and the text their sinks received.
func checkSameClaude(t *testing.T, messages, invoke *Measurement, messagesText, invokeText rawTextRecorder) {
	t.Helper()
	if invoke.Dialect != "bedrock_invoke" || messages.Dialect != "anthropic_messages" {
		t.Fatalf("dialects %q and %q", messages.Dialect, invoke.Dialect)
	}
	// Bedrock's own: the name, the event stream's framing and padding,
	// and the timings of its invocation metrics.
	a, b := *messages, *invoke
	a.Dialect, b.Dialect = "", ""
	a.Bytes, b.Bytes = 0, 0
	b.ServerTimings = nil
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		if fa, fb := va.Field(i).Interface(), vb.Field(i).Interface(); !reflect.DeepEqual(fa, fb) {
			t.Errorf("%s: anthropic_messages %+v, bedrock_invoke %+v", va.Type().Field(i).Name, fa, fb)
		}
	}
	if !reflect.DeepEqual(messagesText, invokeText) {
		t.Errorf("text sinks differ:\nanthropic_messages %q\nbedrock_invoke     %q", messagesText, invokeText)
	}
}

// rawTextRecorder is a TextSink that keeps every fragment as it came.
type rawTextRecorder []string

func (r *rawTextRecorder) Text(choice, item int, kind TextKind, raw string) {
	*r = append(*r, fmt.Sprintf("%d/%d/%d %s", choice, item, kind, raw))
}

// sseClaudeEvents is the events of an Anthropic SSE recording.
func sseClaudeEvents(t *testing.T, body []byte) []claudeEvent {
	t.Helper()
	var events []claudeEvent
	d := sse.Decoder{OnEvent: func(ev *sse.Event) {
		events = append(events, claudeEvent{string(ev.Type), string(ev.Data)})
	}}
	d.Write(body)
	d.Close()
	if len(events) == 0 {
		t.Fatal("no events")
	}
	return events
}

// claudeEvents is the Claude events of an InvokeModel fixture: nil unless
// every message is a chunk and the first holds a message_start. The name
// of each is its JSON type, as Anthropic names its SSE events.
func (fx bedrockFixture) claudeEvents(t *testing.T) []claudeEvent {
	t.Helper()
	if fx.corruptOffset > 0 {
		return nil
	}
	var events []claudeEvent
	for _, m := range fx.msgs {
		if typ := m.Headers.Get(":event-type"); typ == nil || typ.String() != "chunk" {
			return nil
		}
		native, err := base64.StdEncoding.DecodeString(gjson.GetBytes(m.Payload, "bytes").Str)
		if err != nil {
			t.Fatal(err)
		}
		typ := gjson.GetBytes(native, "type").Str
		if len(events) == 0 && typ != "message_start" {
			return nil
		}
		events = append(events, claudeEvent{typ, string(native)})
	}
	return events
}

// encodeBedrockMessage is one event stream message's bytes.
func encodeBedrockMessage(t *testing.T, m aws.Message) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := aws.NewEncoder().Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
