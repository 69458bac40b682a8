package simulator

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// readAnthropicStream reads a Messages stream, insisting on the event:+data:
// pairs, the type repeated in the JSON, and the order message_start,
// content_block_start, ping, deltas, content_block_stop, message_delta,
// message_stop; an error event ends it instead.
func readAnthropicStream(t *testing.T, body []byte) transcript {
	t.Helper()
	tr := newTranscript()
	evs, rest := sseEvents(t, body, "\n")
	if rest != "" {
		t.Fatalf("stream ends inside an event: %q", rest)
	}
	order := []string{"message_start", "content_block_start", "ping"}
	var text strings.Builder
	blockOpen, blockClosed := false, false
	for i, ev := range evs {
		if tr.done || tr.errType != "" {
			t.Fatalf("event after the end: %s", ev.data)
		}
		d := gjson.Parse(ev.data)
		if !gjson.Valid(ev.data) || d.Get("type").Str != ev.name {
			t.Fatalf("event %q has data %s", ev.name, ev.data)
		}
		if i < len(order) && ev.name != order[i] && ev.name != "error" {
			t.Fatalf("event %d is %s, want %s", i, ev.name, order[i])
		}
		switch ev.name {
		case "message_start":
			m := d.Get("message")
			if m.Get("type").Str != "message" || m.Get("role").Str != "assistant" || len(m.Get("content").Array()) != 0 ||
				m.Get("stop_reason").Type != gjson.Null {
				t.Fatalf("message_start %s", ev.data)
			}
			u := m.Get("usage")
			tr.input = int(u.Get("input_tokens").Int() + u.Get("cache_creation_input_tokens").Int() + u.Get("cache_read_input_tokens").Int())
			tr.output = jsonInt(u.Get("output_tokens"))
		case "content_block_start":
			blockOpen = true
		case "ping":
		case "content_block_delta":
			if !blockOpen || blockClosed || d.Get("delta.type").Str != "text_delta" {
				t.Fatalf("delta outside its block: %s", ev.data)
			}
			tr.events++
			text.WriteString(d.Get("delta.text").Str)
		case "content_block_stop":
			blockClosed = true
		case "message_delta":
			if !blockClosed {
				t.Fatal("message_delta before content_block_stop")
			}
			tr.finish = d.Get("delta.stop_reason").Str
			// Cumulative: the last value replaces the provisional one.
			tr.output = jsonInt(d.Get("usage.output_tokens"))
		case "message_stop":
			if tr.finish == "" {
				t.Fatal("message_stop without message_delta")
			}
			tr.done = true
		case "error":
			tr.errType = d.Get("error.type").Str
		default:
			t.Fatalf("unknown event %s", ev.name)
		}
	}
	if !tr.done {
		// A stream that did not end has no final stop reason, and its
		// only usage is message_start's provisional count.
		tr.finish = ""
	}
	tr.text = text.String()
	return tr
}

func readAnthropicBody(t *testing.T, body []byte) transcript {
	t.Helper()
	tr := newTranscript()
	m := gjson.ParseBytes(body)
	if !gjson.ValidBytes(body) || m.Get("type").Str != "message" || m.Get("content.0.type").Str != "text" {
		t.Fatalf("not a message: %s", body)
	}
	tr.events, tr.done = -1, true
	tr.text = m.Get("content.0.text").Str
	tr.finish = m.Get("stop_reason").Str
	u := m.Get("usage")
	tr.input = int(u.Get("input_tokens").Int() + u.Get("cache_creation_input_tokens").Int() + u.Get("cache_read_input_tokens").Int())
	tr.output = jsonInt(u.Get("output_tokens"))
	return tr
}

func TestAnthropicWireFormat(t *testing.T) {
	h := fast(t, Handler{Profile: Profile{OutputTokens: 2}})
	const body = `{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"Say something about speed."}]}`
	p := planTarget(t, h, "/v1/messages", body, nil)
	want := "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"` + p.ID + `","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":6,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}       ` + "\n\n" +
		"event: content_block_start\n" +
		`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}      ` + "\n\n" +
		"event: ping\n" +
		`data: {"type": "ping"}` + "\n\n" +
		"event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + p.Tokens[0] + `"}}  ` + "\n\n" +
		"event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + p.Tokens[1] + `"}}              ` + "\n\n" +
		"event: content_block_stop\n" +
		`data: {"type":"content_block_stop","index":0}   ` + "\n\n" +
		"event: message_delta\n" +
		`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}      ` + "\n\n" +
		"event: message_stop\n" +
		`data: {"type":"message_stop"}      ` + "\n\n"
	_, got, _ := serveTarget(t, h, "/v1/messages", body, nil)
	if string(got) != want {
		t.Errorf("stream bytes:\n%q\nwant:\n%q", got, want)
	}

	const plain = `{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[{"role":"user","content":"Say something about speed."}]}`
	p = planTarget(t, h, "/v1/messages", plain, nil)
	want = `{"id":"` + p.ID + `","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"` + p.Text() + `"}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":6,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}`
	_, got, _ = serveTarget(t, h, "/v1/messages", plain, nil)
	if string(got) != want {
		t.Errorf("message bytes:\n%s\nwant:\n%s", got, want)
	}
}

func TestAnthropicTraps(t *testing.T) {
	h := formatHandler(t, Handler{})
	f := wireFormats[2]
	_, raw, _ := serveTarget(t, h, f.target, f.stream, nil)
	evs, _ := sseEvents(t, raw, "\n")

	t.Run("whitespace-padded JSON", func(t *testing.T) {
		pads := map[int]bool{}
		for _, ev := range evs {
			pads[len(ev.data)-len(strings.TrimRight(ev.data, " "))] = true
		}
		if len(pads) < 4 {
			t.Errorf("padding lengths %v: want several, as recorded streams have", pads)
		}
	})
	t.Run("ping with a space after the colon", func(t *testing.T) {
		if evs[2].name != "ping" || evs[2].data != `{"type": "ping"}` {
			t.Errorf("third event %q %q", evs[2].name, evs[2].data)
		}
	})
	t.Run("provisional output in message_start", func(t *testing.T) {
		if got := gjson.Get(evs[0].data, "message.usage.output_tokens").Int(); got != 1 {
			t.Errorf("message_start output_tokens %d, want the provisional 1", got)
		}
		last := evs[len(evs)-2]
		if last.name != "message_delta" || gjson.Get(last.data, "usage.output_tokens").Int() != fullTokens ||
			gjson.Get(last.data, "usage.input_tokens").Exists() {
			t.Errorf("message_delta %s: want the cumulative output only", last.data)
		}
	})
	t.Run("mid-stream error as documented", func(t *testing.T) {
		_, raw, _ := serveTarget(t, h, f.target, f.stream, map[string]string{HeaderErrorAfter: "1"})
		want := "event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n"
		if !strings.HasSuffix(string(raw), want) || strings.Contains(string(raw), "message_stop") {
			t.Errorf("stream %q", raw)
		}
	})
	t.Run("usage never still reports", func(t *testing.T) {
		p := planTarget(t, h, f.target, f.stream, map[string]string{HeaderUsage: "never"})
		if !p.Usage {
			t.Error("Anthropic's usage is not optional, yet the plan drops it")
		}
	})
}
