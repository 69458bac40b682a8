package simulator

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// geminiChunk folds one GenerateContentResponse into tr, checking that the
// usage is cumulative and that nothing follows the finishReason.
func geminiChunk(t *testing.T, tr *transcript, text *strings.Builder, data string) {
	t.Helper()
	c := gjson.Parse(data)
	if !gjson.Valid(data) || c.Get("candidates.0.content.role").Str != "model" || c.Get("responseId").Str == "" {
		t.Fatalf("chunk %s", data)
	}
	if tr.finish != "" {
		t.Fatalf("chunk after the finishReason: %s", data)
	}
	tr.events++
	text.WriteString(c.Get("candidates.0.content.parts.0.text").Str)
	if u := c.Get("usageMetadata"); u.Exists() {
		if int(u.Get("candidatesTokenCount").Int()) != tr.events {
			t.Fatalf("chunk %d has candidatesTokenCount %d: usage is not cumulative", tr.events, u.Get("candidatesTokenCount").Int())
		}
		tr.input, tr.output = jsonInt(u.Get("promptTokenCount")), jsonInt(u.Get("candidatesTokenCount"))
		if u.Get("totalTokenCount").Int() != int64(tr.input+tr.output) {
			t.Fatalf("usage does not add up: %s", u.Raw)
		}
	} else if tr.input != -1 {
		t.Fatalf("chunk without the usageMetadata of its predecessors: %s", data)
	}
	if fr := c.Get("candidates.0.finishReason"); fr.Exists() {
		tr.finish, tr.done = fr.Str, true
	}
}

// geminiMidStreamError reads the bare error object that ends a failed
// stream.
func geminiMidStreamError(t *testing.T, tr *transcript, rest string) {
	t.Helper()
	if !gjson.Valid(rest) || gjson.Get(rest, "error.code").Int() != 503 {
		t.Fatalf("stream ends with %q, not an error object", rest)
	}
	if !strings.HasPrefix(rest, "{\n  \"error\": {") {
		t.Fatalf("the error is not pretty-printed: %q", rest)
	}
	tr.errType = gjson.Get(rest, "error.status").Str
}

// readGeminiSSE reads an alt=sse stream: data: lines ended by CRLF, each
// event by a blank CRLF line, no terminator, and possibly a bare error
// object after the last event.
func readGeminiSSE(t *testing.T, body []byte) transcript {
	t.Helper()
	tr := newTranscript()
	evs, rest := sseEvents(t, body, "\r\n")
	var text strings.Builder
	for _, ev := range evs {
		if ev.name != "" {
			t.Fatalf("Gemini event with a name: %q", ev.name)
		}
		geminiChunk(t, &tr, &text, ev.data)
	}
	if rest != "" {
		geminiMidStreamError(t, &tr, rest)
	}
	if tr.errType != "" || !tr.done {
		tr.finish = ""
	}
	tr.text = text.String()
	return tr
}

// readGeminiArray reads the streamed JSON array: "[" before the first
// element, "," before every other, CRLF after each, "]" at the end.
func readGeminiArray(t *testing.T, body []byte) transcript {
	t.Helper()
	tr := newTranscript()
	var text strings.Builder
	s := string(body)
	if s == "" {
		tr.text = ""
		return tr
	}
	closed := strings.HasSuffix(s, "]")
	s = strings.TrimSuffix(s, "]")
	for i := 0; s != ""; i++ {
		sep := ","
		if i == 0 {
			sep = "["
		}
		rest, ok := strings.CutPrefix(s, sep)
		if !ok {
			t.Fatalf("element %d does not start with %q: %q", i, sep, s)
		}
		if strings.HasPrefix(rest, "{\n") {
			// The error element is pretty-printed and runs to the end.
			geminiMidStreamError(t, &tr, rest)
			if !closed {
				t.Fatal("the array is not closed after the error")
			}
			break
		}
		elem, after, ok := strings.Cut(rest, "\r\n")
		if !ok {
			t.Fatalf("element %d is not ended by CRLF: %q", i, rest)
		}
		geminiChunk(t, &tr, &text, elem)
		s = after
	}
	if closed && tr.errType == "" && !tr.done {
		t.Fatal("the array closed without a finishReason")
	}
	if !closed {
		tr.done, tr.finish = false, ""
	}
	if closed && !json.Valid(body) {
		t.Fatalf("a closed array that is not valid JSON: %q", body)
	}
	tr.text = text.String()
	return tr
}

func readGeminiBody(t *testing.T, body []byte) transcript {
	t.Helper()
	tr := newTranscript()
	if !bytes.HasPrefix(body, []byte("{\n  \"candidates\": [")) || !json.Valid(body) {
		t.Fatalf("not a pretty-printed GenerateContentResponse: %s", body)
	}
	c := gjson.ParseBytes(body)
	tr.events, tr.done = -1, true
	tr.text = c.Get("candidates.0.content.parts.0.text").Str
	tr.finish = c.Get("candidates.0.finishReason").Str
	if u := c.Get("usageMetadata"); u.Exists() {
		tr.input, tr.output = jsonInt(u.Get("promptTokenCount")), jsonInt(u.Get("candidatesTokenCount"))
	}
	return tr
}

func TestGeminiWireFormat(t *testing.T) {
	h := fast(t, Handler{Profile: Profile{OutputTokens: 2}})
	const body = `{"contents":[{"role":"user","parts":[{"text":"Say something about speed."}]}]}`
	p := planTarget(t, h, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", body, nil)
	chunk := func(i int, finish string) string {
		s := `{"candidates": [{"content": {"parts": [{"text": "` + p.Tokens[i] + `"}],"role": "model"}`
		if finish != "" {
			s += `,"finishReason": "` + finish + `"`
		}
		n := []string{"1", "2"}[i]
		total := []string{"7", "8"}[i]
		return s + `,"index": 0}],"usageMetadata": {"promptTokenCount": 6,"candidatesTokenCount": ` + n + `,"totalTokenCount": ` + total +
			`,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 6}]},"modelVersion": "gemini-2.5-flash","responseId": "` + p.ID + `"}`
	}
	want := "data: " + chunk(0, "") + "\r\n\r\n" + "data: " + chunk(1, "STOP") + "\r\n\r\n"
	_, got, _ := serveTarget(t, h, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", body, nil)
	if string(got) != want {
		t.Errorf("SSE bytes:\n%q\nwant:\n%q", got, want)
	}

	want = "[" + chunk(0, "") + "\r\n," + chunk(1, "STOP") + "\r\n]"
	_, got, _ = serveTarget(t, h, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", body, nil)
	if string(got) != want {
		t.Errorf("array bytes:\n%q\nwant:\n%q", got, want)
	}

	want = "{\n  \"candidates\": [\n    {\n      \"content\": {\n        \"parts\": [\n          {\n            \"text\": \"" + p.Text() + "\"\n          }\n        ],\n" +
		"        \"role\": \"model\"\n      },\n      \"finishReason\": \"STOP\",\n      \"index\": 0\n    }\n  ],\n" +
		"  \"usageMetadata\": {\n    \"promptTokenCount\": 6,\n    \"candidatesTokenCount\": 2,\n    \"totalTokenCount\": 8,\n" +
		"    \"promptTokensDetails\": [\n      {\n        \"modality\": \"TEXT\",\n        \"tokenCount\": 6\n      }\n    ]\n  },\n" +
		"  \"modelVersion\": \"gemini-2.5-flash\",\n  \"responseId\": \"" + p.ID + "\"\n}\n"
	_, got, _ = serveTarget(t, h, "/v1beta/models/gemini-2.5-flash:generateContent", body, nil)
	if string(got) != want {
		t.Errorf("body bytes:\n%s\nwant:\n%s", got, want)
	}
}

func TestGeminiTraps(t *testing.T) {
	h := formatHandler(t, Handler{})
	sse, array := wireFormats[3], wireFormats[4]
	t.Run("CRLF framing only", func(t *testing.T) {
		_, raw, _ := serveTarget(t, h, sse.target, sse.stream, nil)
		if n := bytes.Count(raw, []byte("\n")); n != bytes.Count(raw, []byte("\r\n")) || n != 2*fullTokens {
			t.Errorf("%d LFs, %d CRLFs, want %d CRLFs and no lone LF", n, bytes.Count(raw, []byte("\r\n")), 2*fullTokens)
		}
		if bytes.Contains(raw, []byte("\n\n")) {
			t.Error("an LF-only blank line")
		}
	})
	t.Run("no terminator after the finishReason", func(t *testing.T) {
		_, raw, _ := serveTarget(t, h, sse.target, sse.stream, nil)
		evs, rest := sseEvents(t, raw, "\r\n")
		if rest != "" || !gjson.Get(evs[len(evs)-1].data, "candidates.0.finishReason").Exists() || bytes.Contains(raw, []byte("[DONE]")) {
			t.Errorf("stream ends %q", raw[max(0, len(raw)-80):])
		}
		for _, ev := range evs[:len(evs)-1] {
			if gjson.Get(ev.data, "candidates.0.finishReason").Exists() {
				t.Errorf("finishReason before the last chunk: %s", ev.data)
			}
		}
	})
	t.Run("bare error object after SSE events", func(t *testing.T) {
		_, raw, _ := serveTarget(t, h, sse.target, sse.stream, map[string]string{HeaderErrorAfter: "2"})
		_, rest := sseEvents(t, raw, "\r\n")
		want := "{\n  \"error\": {\n    \"code\": 503,\n    \"message\": \"The model is overloaded. Please try again later.\",\n    \"status\": \"UNAVAILABLE\"\n  }\n}\n"
		if rest != want {
			t.Errorf("after the events %q, want %q", rest, want)
		}
	})
	t.Run("error element closes the array", func(t *testing.T) {
		_, raw, _ := serveTarget(t, h, array.target, array.stream, map[string]string{HeaderErrorAfter: "0"})
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil || len(elems) != 1 || gjson.GetBytes(elems[0], "error.status").Str != "UNAVAILABLE" {
			t.Errorf("array %s: %v", raw, err)
		}
	})
	t.Run("truncated array is left open", func(t *testing.T) {
		_, raw, _ := serveTarget(t, h, array.target, array.stream, map[string]string{HeaderTruncateAfter: "3"})
		if json.Valid(raw) || !bytes.HasSuffix(raw, []byte("}\r\n")) {
			t.Errorf("truncated array %q", raw)
		}
	})
	t.Run("usage never omits usageMetadata", func(t *testing.T) {
		_, raw, _ := serveTarget(t, h, sse.target, sse.stream, map[string]string{HeaderUsage: "never"})
		if bytes.Contains(raw, []byte("usageMetadata")) {
			t.Error("usageMetadata despite usage never")
		}
	})
	t.Run("model from the path", func(t *testing.T) {
		_, raw, _ := serveTarget(t, h, "/v1beta/models/gemini-2.0-flash-lite:generateContent", `{"model":"other","contents":[{"parts":[{"text":"hi"}]}]}`, nil)
		if got := gjson.GetBytes(raw, "modelVersion").Str; got != "gemini-2.0-flash-lite" {
			t.Errorf("modelVersion %q", got)
		}
	})
}
