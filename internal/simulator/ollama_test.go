package simulator

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tidwall/gjson"
)

// readOllamaStream reads an NDJSON stream: one compact object a line, each
// with model and created_at, done:false objects with the text, then one
// done:true object; an {"error":…} line ends a failed stream.
func readOllamaStream(t *testing.T, body []byte, chat bool) transcript {
	t.Helper()
	tr := newTranscript()
	s := string(body)
	if s != "" && !strings.HasSuffix(s, "\n") {
		t.Fatalf("stream does not end with a newline: %q", s)
	}
	var text strings.Builder
	var last time.Time
	for line := range strings.SplitSeq(strings.TrimSuffix(s, "\n"), "\n") {
		if s == "" {
			break
		}
		o := gjson.Parse(line)
		if !gjson.Valid(line) || !o.IsObject() {
			t.Fatalf("line %q is not a JSON object", line)
		}
		if tr.done || tr.errType != "" {
			t.Fatalf("line after the end: %s", line)
		}
		if e := o.Get("error"); e.Exists() {
			tr.errType = "error" // Ollama's errors have only a message
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, o.Get("created_at").Str)
		if err != nil || at.Before(last) || o.Get("model").Str == "" {
			t.Fatalf("line %s: created_at %v (previous %v)", line, err, last)
		}
		last = at
		readOllamaObject(t, &tr, &text, o, chat)
		if !tr.done {
			tr.events++
		}
	}
	tr.text = text.String()
	return tr
}

// readOllamaObject reads one object's text and, when it is the final one,
// its reason and counts.
func readOllamaObject(t *testing.T, tr *transcript, text *strings.Builder, o gjson.Result, chat bool) {
	t.Helper()
	if chat {
		if o.Get("message.role").Str != "assistant" || o.Get("response").Exists() {
			t.Fatalf("chat object %s", o.Raw)
		}
		text.WriteString(o.Get("message.content").Str)
	} else {
		if o.Get("message").Exists() || !o.Get("response").Exists() {
			t.Fatalf("generate object %s", o.Raw)
		}
		text.WriteString(o.Get("response").Str)
	}
	done := o.Get("done")
	if done.Type != gjson.True && done.Type != gjson.False {
		t.Fatalf("object without done: %s", o.Raw)
	}
	if done.Type == gjson.False {
		return
	}
	tr.done = true
	tr.finish = o.Get("done_reason").Str
	tr.input, tr.output = jsonInt(o.Get("prompt_eval_count")), jsonInt(o.Get("eval_count"))
	if o.Get("total_duration").Int() <= 0 || o.Get("eval_duration").Int() <= 0 {
		t.Fatalf("final object without durations: %s", o.Raw)
	}
}

func readOllamaChatStream(t *testing.T, body []byte) transcript {
	return readOllamaStream(t, body, true)
}

func readOllamaGenerateStream(t *testing.T, body []byte) transcript {
	return readOllamaStream(t, body, false)
}

func readOllamaBody(t *testing.T, body []byte, chat bool) transcript {
	t.Helper()
	tr := newTranscript()
	o := gjson.ParseBytes(body)
	if !gjson.ValidBytes(body) || o.Get("done").Type != gjson.True {
		t.Fatalf("not a final object: %s", body)
	}
	var text strings.Builder
	readOllamaObject(t, &tr, &text, o, chat)
	tr.events, tr.text = -1, text.String()
	return tr
}

func readOllamaChatBody(t *testing.T, body []byte) transcript { return readOllamaBody(t, body, true) }

func readOllamaGenerateBody(t *testing.T, body []byte) transcript {
	return readOllamaBody(t, body, false)
}

func TestOllamaWireFormat(t *testing.T) {
	h := fast(t, Handler{Profile: Profile{
		TimeToFirstToken: caddy.Duration(100 * time.Millisecond),
		TokensPerSecond:  50,
		OutputTokens:     2,
	}})
	// Only the bytes matter here, so the plan is checked, not served.
	const chat = `{"model":"llama3.2","messages":[{"role":"user","content":"Say something about speed."}]}`
	p := planTarget(t, h, "/api/chat", chat, nil)
	enc := ollama{chat: true}.stream(&p)
	var got strings.Builder
	emit := func(b []byte) bool { got.Write(b); return true }
	enc.start(emit)
	for i := range p.Tokens {
		emit(enc.token(i))
	}
	enc.end(emit)
	// 100ms to the first token, 20ms to the second: the first token costs
	// one interval, the 80ms before it are 8ms of load and 72ms of prompt
	// evaluation, and eval_count/eval_duration is 2 tokens in 40ms, the
	// 50 tokens/s of the schedule.
	want := `{"model":"llama3.2","created_at":"2026-01-01T00:00:00.1Z","message":{"role":"assistant","content":"` + p.Tokens[0] + `"},"done":false}` + "\n" +
		`{"model":"llama3.2","created_at":"2026-01-01T00:00:00.12Z","message":{"role":"assistant","content":"` + p.Tokens[1] + `"},"done":false}` + "\n" +
		`{"model":"llama3.2","created_at":"2026-01-01T00:00:00.12Z","message":{"role":"assistant","content":""},"done_reason":"stop","done":true,` +
		`"total_duration":120000000,"load_duration":8000000,"prompt_eval_count":6,"prompt_eval_duration":72000000,"eval_count":2,"eval_duration":40000000}` + "\n"
	if got.String() != want {
		t.Errorf("chat stream:\n%s\nwant:\n%s", got.String(), want)
	}

	const generate = `{"model":"llama3.2","prompt":"Say something about speed.","stream":false,"options":{"num_predict":1}}`
	p = planTarget(t, h, "/api/generate", generate, nil)
	body, contentType, textStart := ollama{}.body(&p)
	want = `{"model":"llama3.2","created_at":"2026-01-01T00:00:00.1Z","response":"` + p.Text() + `","done":true,"done_reason":"length",` +
		`"total_duration":100000000,"load_duration":8000000,"prompt_eval_count":6,"prompt_eval_duration":72000000,"eval_count":1,"eval_duration":20000000}`
	if string(body) != want || contentType != "application/json; charset=utf-8" || !strings.HasPrefix(string(body[textStart:]), p.Text()+`"`) {
		t.Errorf("generate body (%s, text at %d):\n%s\nwant:\n%s", contentType, textStart, body, want)
	}
}

func TestOllamaTraps(t *testing.T) {
	h := formatHandler(t, Handler{})
	f := wireFormats[5]
	t.Run("streams unless told not to", func(t *testing.T) {
		res, _, _ := serveTarget(t, h, "/api/chat", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil)
		if res.Header.Get("Content-Type") != "application/x-ndjson" {
			t.Errorf("Content-Type %q", res.Header.Get("Content-Type"))
		}
	})
	t.Run("created_at follows the schedule", func(t *testing.T) {
		_, raw, _ := serveTarget(t, h, f.target, f.stream, nil)
		p := planTarget(t, h, f.target, f.stream, nil)
		lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
		for i, line := range lines {
			at, _ := time.Parse(time.RFC3339Nano, gjson.Get(line, "created_at").Str)
			want := p.LastToken()
			if i < len(p.Tokens) {
				want = p.Offsets[i]
			}
			if got := at.Sub(time.Unix(created, 0)); got != want {
				t.Errorf("line %d created at +%v, scheduled +%v", i, got, want)
			}
		}
	})
	t.Run("durations add up to the schedule", func(t *testing.T) {
		hh := formatHandler(t, Handler{Profile: Profile{TimeToFirstToken: caddy.Duration(300 * time.Millisecond), TokensPerSecond: 40, Jitter: 0.4}})
		p := planTarget(t, hh, f.target, f.stream, nil)
		d := newOllamaDurations(&p)
		if d.load+d.promptEval+d.eval != d.total || time.Duration(d.total) != p.LastToken() {
			t.Errorf("durations %+v do not add up to %v", d, p.LastToken())
		}
		rate := float64(len(p.Tokens)) / time.Duration(d.eval).Seconds()
		if r := rate / p.DecodeRate(); r < 0.999 || r > 1.001 {
			t.Errorf("eval rate %.3f, decode rate %.3f", rate, p.DecodeRate())
		}
	})
	t.Run("usage never drops the counts, not the durations", func(t *testing.T) {
		_, raw, _ := serveTarget(t, h, f.target, f.stream, map[string]string{HeaderUsage: "never"})
		lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
		final := gjson.Parse(lines[len(lines)-1])
		if final.Get("eval_count").Exists() || final.Get("prompt_eval_count").Exists() || !final.Get("eval_duration").Exists() {
			t.Errorf("final object %s", final.Raw)
		}
	})
	t.Run("error line", func(t *testing.T) {
		_, raw, _ := serveTarget(t, h, f.target, f.stream, map[string]string{HeaderErrorAfter: "1"})
		if !strings.HasSuffix(string(raw), "\n"+`{"error":"an error was encountered while running the model"}`+"\n") {
			t.Errorf("stream %s", raw)
		}
	})
}
