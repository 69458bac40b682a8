package simulator

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// readResponsesStream reads a Responses stream, insisting on the event:+data:
// pairs, the type repeated in the JSON, sequence numbers counting from 0 and
// the lifecycle order; the terminal event is response.completed or
// response.incomplete, or error then response.failed.
func readResponsesStream(t *testing.T, body []byte) transcript {
	t.Helper()
	tr := newTranscript()
	evs, rest := sseEvents(t, body, "\n")
	if rest != "" {
		t.Fatalf("stream ends inside an event: %q", rest)
	}
	lifecycle := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
	closing := []string{"response.output_text.done", "response.content_part.done", "response.output_item.done"}
	var text strings.Builder
	var itemID string
	closed := 0
	for i, ev := range evs {
		d := gjson.Parse(ev.data)
		if !gjson.Valid(ev.data) || d.Get("type").Str != ev.name || d.Get("sequence_number").Int() != int64(i) ||
			!strings.HasPrefix(ev.data, `{"type":"`+ev.name+`","sequence_number":`) {
			t.Fatalf("event %d %q has data %s", i, ev.name, ev.data)
		}
		if tr.done {
			t.Fatalf("event after the end: %s", ev.data)
		}
		if tr.errType != "" && ev.name != "response.failed" {
			t.Fatalf("%s after the error event", ev.name)
		}
		if i < len(lifecycle) && ev.name != lifecycle[i] && ev.name != "error" {
			t.Fatalf("event %d is %s, want %s", i, ev.name, lifecycle[i])
		}
		switch ev.name {
		case "response.created", "response.in_progress":
			r := d.Get("response")
			if r.Get("status").Str != "in_progress" || r.Get("usage").Type != gjson.Null || r.Get("object").Str != "response" {
				t.Fatalf("%s %s", ev.name, ev.data)
			}
		case "response.output_item.added":
			itemID = d.Get("item.id").Str
			if d.Get("item.type").Str != "message" || d.Get("item.status").Str != "in_progress" {
				t.Fatalf("item %s", ev.data)
			}
		case "response.content_part.added":
			if d.Get("item_id").Str != itemID || d.Get("part.type").Str != "output_text" || d.Get("part.text").Str != "" {
				t.Fatalf("part %s", ev.data)
			}
		case "response.output_text.delta":
			if closed > 0 || d.Get("item_id").Str != itemID || d.Get("obfuscation").Str == "" {
				t.Fatalf("delta %s", ev.data)
			}
			tr.events++
			text.WriteString(d.Get("delta").Str)
		case "response.output_text.done", "response.content_part.done", "response.output_item.done":
			if ev.name != closing[closed] {
				t.Fatalf("%s out of order", ev.name)
			}
			closed++
			if ev.name == "response.output_text.done" && d.Get("text").Str != text.String() {
				t.Fatalf("done text %q, deltas %q", d.Get("text").Str, text.String())
			}
		case "response.completed", "response.incomplete":
			if closed != len(closing) {
				t.Fatalf("%s before the item is done", ev.name)
			}
			r := d.Get("response")
			tr.done = true
			tr.finish = r.Get("status").Str
			if ev.name == "response.incomplete" {
				tr.finish = r.Get("incomplete_details.reason").Str
			}
			if r.Get("output.0.content.0.text").Str != text.String() {
				t.Fatalf("terminal output differs from the deltas: %s", ev.data)
			}
			tr.input, tr.output = jsonInt(r.Get("usage.input_tokens")), jsonInt(r.Get("usage.output_tokens"))
		case "error":
			tr.errType = d.Get("error.type").Str
		case "response.failed":
			if tr.errType == "" || d.Get("response.status").Str != "failed" || d.Get("response.usage").Type != gjson.Null {
				t.Fatalf("response.failed %s", ev.data)
			}
		default:
			t.Fatalf("unknown event %s", ev.name)
		}
	}
	tr.text = text.String()
	return tr
}

func readResponsesBody(t *testing.T, body []byte) transcript {
	t.Helper()
	tr := newTranscript()
	r := gjson.ParseBytes(body)
	if !gjson.ValidBytes(body) || r.Get("object").Str != "response" {
		t.Fatalf("not a response: %s", body)
	}
	tr.events, tr.done = -1, true
	tr.text = r.Get("output.0.content.0.text").Str
	tr.finish = r.Get("status").Str
	if tr.finish == "incomplete" {
		tr.finish = r.Get("incomplete_details.reason").Str
	}
	tr.input, tr.output = jsonInt(r.Get("usage.input_tokens")), jsonInt(r.Get("usage.output_tokens"))
	return tr
}

func TestResponsesWireFormat(t *testing.T) {
	h := fast(t, Handler{Profile: Profile{OutputTokens: 2}})
	const body = `{"model":"gpt-5","stream":true,"input":"Say something about speed."}`
	p := planTarget(t, h, "/v1/responses", body, nil)
	id, item := p.ID, "msg_sim"+strings.TrimPrefix(p.ID, "resp_sim")
	text := p.Text()
	head := `{"id":"` + id + `","object":"response","created_at":1767225600,"status":`
	tail := `"parallel_tool_calls":true,"previous_response_id":null,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],`
	inProgress := head + `"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":"gpt-5","output":[],` + tail + `"usage":null,"metadata":{}}`
	part := func(s string) string {
		return `{"type":"output_text","annotations":[],"logprobs":[],"text":"` + s + `"}`
	}
	done := `{"id":"` + item + `","type":"message","status":"completed","content":[` + part(text) + `],"role":"assistant"}`
	obf := func(tok string) string { return obfuscationAlphabet[:max(1, 16-len(tok))] }
	want := "event: response.created\n" +
		`data: {"type":"response.created","sequence_number":0,"response":` + inProgress + "}\n\n" +
		"event: response.in_progress\n" +
		`data: {"type":"response.in_progress","sequence_number":1,"response":` + inProgress + "}\n\n" +
		"event: response.output_item.added\n" +
		`data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"` + item + `","type":"message","status":"in_progress","content":[],"role":"assistant"}}` + "\n\n" +
		"event: response.content_part.added\n" +
		`data: {"type":"response.content_part.added","sequence_number":3,"item_id":"` + item + `","output_index":0,"content_index":0,"part":` + part("") + "}\n\n" +
		"event: response.output_text.delta\n" +
		`data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"` + item + `","output_index":0,"content_index":0,"delta":"` + p.Tokens[0] + `","logprobs":[],"obfuscation":"` + obf(p.Tokens[0]) + `"}` + "\n\n" +
		"event: response.output_text.delta\n" +
		`data: {"type":"response.output_text.delta","sequence_number":5,"item_id":"` + item + `","output_index":0,"content_index":0,"delta":"` + p.Tokens[1] + `","logprobs":[],"obfuscation":"` + obf(p.Tokens[1]) + `"}` + "\n\n" +
		"event: response.output_text.done\n" +
		`data: {"type":"response.output_text.done","sequence_number":6,"item_id":"` + item + `","output_index":0,"content_index":0,"text":"` + text + `","logprobs":[]}` + "\n\n" +
		"event: response.content_part.done\n" +
		`data: {"type":"response.content_part.done","sequence_number":7,"item_id":"` + item + `","output_index":0,"content_index":0,"part":` + part(text) + "}\n\n" +
		"event: response.output_item.done\n" +
		`data: {"type":"response.output_item.done","sequence_number":8,"output_index":0,"item":` + done + "}\n\n" +
		"event: response.completed\n" +
		`data: {"type":"response.completed","sequence_number":9,"response":` + head + `"completed","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":"gpt-5","output":[` + done + `],` + tail +
		`"usage":{"input_tokens":6,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":8},"metadata":{}}}` + "\n\n"
	_, got, _ := serveTarget(t, h, "/v1/responses", body, nil)
	if string(got) != want {
		t.Errorf("stream bytes:\n%s\nwant:\n%s", got, want)
	}
}

func TestResponsesTraps(t *testing.T) {
	h := formatHandler(t, Handler{})
	f := wireFormats[1]
	t.Run("max_output_tokens ends in response.incomplete", func(t *testing.T) {
		_, raw, _ := serveTarget(t, h, f.target, f.capped, nil)
		evs, _ := sseEvents(t, raw, "\n")
		last := evs[len(evs)-1]
		r := gjson.Get(last.data, "response")
		if last.name != "response.incomplete" || r.Get("status").Str != "incomplete" ||
			r.Get("incomplete_details.reason").Str != "max_output_tokens" || r.Get("max_output_tokens").Int() != cappedTokens ||
			r.Get("usage.output_tokens").Int() != cappedTokens || r.Get("output.0.status").Str != "incomplete" {
			t.Errorf("last event %s %s", last.name, last.data)
		}
	})
	t.Run("error event then response.failed", func(t *testing.T) {
		_, raw, _ := serveTarget(t, h, f.target, f.stream, map[string]string{HeaderErrorAfter: "2"})
		evs, _ := sseEvents(t, raw, "\n")
		n := len(evs)
		if n < 2 || evs[n-2].name != "error" || evs[n-1].name != "response.failed" ||
			gjson.Get(evs[n-2].data, "error.type").Str != "server_error" ||
			gjson.Get(evs[n-1].data, "response.error.code").Str != "server_error" {
			t.Errorf("stream ends with %v", evs[max(0, n-2):])
		}
	})
	t.Run("usage never is null", func(t *testing.T) {
		_, raw, _ := serveTarget(t, h, f.target, f.stream, map[string]string{HeaderUsage: "never"})
		evs, _ := sseEvents(t, raw, "\n")
		if u := gjson.Get(evs[len(evs)-1].data, "response.usage"); u.Type != gjson.Null {
			t.Errorf("usage %s, want null", u.Raw)
		}
	})
	t.Run("obfuscation pads every delta alike", func(t *testing.T) {
		_, raw, _ := serveTarget(t, h, f.target, f.stream, nil)
		evs, _ := sseEvents(t, raw, "\n")
		for _, ev := range evs {
			if ev.name == "response.output_text.delta" {
				d := gjson.Parse(ev.data)
				if n := len(d.Get("delta").Str) + len(d.Get("obfuscation").Str); n != 16 && len(d.Get("obfuscation").Str) != 1 {
					t.Errorf("delta and obfuscation of %d bytes: %s", n, ev.data)
				}
			}
		}
	})
}
