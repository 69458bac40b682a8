package meter

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/tokentap/tokentap/sse"
)

// wholeChunks reads the OpenAI chat dialect's chunks whole: it forgets
// the repeated head before every event, as if there were none.
type wholeChunks struct{ openAIChat }

func (wholeChunks) Event(o *Observer, ev *sse.Event) {
	o.head.clear()
	openAIChat{}.Event(o, ev)
}

// readChatStream reads body as a streamed chat completion with d, one
// event per write, each a step after the last.
func readChatStream(d Dialect, body []byte) Measurement {
	mt := New(d, Options{MaxEventSize: 4096}, t0)
	mt.Response(200, "text/event-stream", "")
	at := t0
	for _, ev := range bytes.SplitAfter(body, []byte("\n\n")) {
		at = at.Add(time.Millisecond)
		mt.Write(ev, at)
	}
	return *mt.Finish(at.Add(time.Millisecond), OutcomeUnknown, "")
}

// checkHeadSkipExact fails unless skipping repeated heads measures body
// exactly as reading every chunk whole does.
func checkHeadSkipExact(t *testing.T, body []byte) {
	t.Helper()
	skipped, whole := readChatStream(openAIChat{}, body), readChatStream(wholeChunks{}, body)
	if !reflect.DeepEqual(skipped, whole) {
		t.Fatalf("skipping repeated heads changed the measurement:\nskipped %+v\nwhole   %+v", skipped, whole)
	}
}

// TestRepeatedHeadSkipIsExact holds the head skip to reading every chunk
// whole, on streams made to trip it and on every recorded and hand-made
// OpenAI-style stream in testdata.
func TestRepeatedHeadSkipIsExact(t *testing.T) {
	const head = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m",`
	chunk := func(s string) string { return "data: " + s + "\n\n" }
	for _, tc := range []struct {
		name string
		body string
		// skips says whether the stream's later chunks take the skip.
		skips bool
	}{
		{"the same head on every chunk", chunk(head+`"choices":[{"index":0,"delta":{"content":"a"}}]}`) +
			chunk(head+`"choices":[{"index":0,"delta":{"content":"b"}}]}`) + chunk(head+`"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}`) + "data: [DONE]\n\n", true},
		{"a model after choices, then the head again", chunk(head+`"choices":[{"index":0,"delta":{"content":"a"}}],"model":"late"}`) +
			chunk(head+`"choices":[{"index":0,"delta":{"content":"b"}}]}`), false},
		{"a late model on a skipped chunk", chunk(head+`"choices":[{"index":0,"delta":{"content":"a"}}]}`) +
			chunk(head+`"choices":[{"index":0,"delta":{"content":"b"}}],"id":"c2"}`) + chunk(head+`"choices":[{"index":0,"delta":{"content":"c"}}]}`), true},
		{"the head changes", chunk(head+`"choices":[{"index":0,"delta":{"content":"a"}}]}`) +
			chunk(`{"id":"c2","object":"chat.completion.chunk","created":1,"model":"m2","choices":[{"index":0,"delta":{"content":"b"}}]}`) +
			chunk(head+`"choices":[{"index":0,"delta":{"content":"c"}}]}`), false},
		{"an error object after the same head", chunk(`{"id":"c1","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"a"}}]}`) +
			chunk(`{"id":"c1","created":1,"model":"m","object":"error","type":"overloaded"}`), true},
		{"a head that acts first: usage", chunk(`{"usage":{"prompt_tokens":1,"completion_tokens":1},"id":"c1","choices":[{"index":0,"delta":{"content":"a"}}]}`) +
			chunk(`{"usage":{"prompt_tokens":1,"completion_tokens":1},"id":"c1","choices":[{"index":0,"delta":{"content":"b"}}]}`), false},
		{"spaces around keys and colons", chunk(`{ "id" : "c1" , "model":"m" , "choices" : [{"index":0,"delta":{"content":"a"}}]}`) +
			chunk(`{ "id" : "c1" , "model":"m" , "choices" : [{"index":0,"delta":{"content":"b"}}]}`), true},
		{"the same head, then more space before the next key", chunk(`{"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"a"}}]}`) +
			chunk(`{"id":"c1","model":"m",  	"choices":[{"index":0,"delta":{"content":"b"}}],"usage":{"prompt_tokens":2,"completion_tokens":2}}`), true},
		{"the same head, then broken", chunk(head+`"choices":[{"index":0,"delta":{"content":"a"}}]}`) +
			chunk(head+`"choices":[{"index":0,"delta":{"content":"b"`) + chunk(head+`"choices":[{"index":0,"delta":{"content":"c"}}]}`), true},
		{"the head and nothing after it", chunk(head+`"choices":[{"index":0,"delta":{"content":"a"}}]}`) + chunk(head+"}"), true},
		{"a head longer than is kept", chunk(`{"id":"`+string(bytes.Repeat([]byte("x"), 300))+`","choices":[{"index":0,"delta":{"content":"a"}}]}`) +
			chunk(`{"id":"`+string(bytes.Repeat([]byte("x"), 300))+`","choices":[{"index":0,"delta":{"content":"b"}}]}`), false},
		{"a done object after the same head", chunk(`{"id":"c1","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"a"}}]}`) +
			chunk(`{"id":"c1","created":1,"model":"m","object":"chat.completion.done","choices":[]}`), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkHeadSkipExact(t, []byte(tc.body))
			if got := headSkips([]byte(tc.body)); got != tc.skips {
				t.Errorf("a later chunk skipped its head: %v, want %v", got, tc.skips)
			}
		})
	}
	files, _ := filepath.Glob("testdata/openai/*.sse")
	more, _ := filepath.Glob("testdata/recorded/*/*.sse")
	files = append(files, more...)
	if len(files) < 20 {
		t.Fatalf("%d OpenAI-style streams in testdata, want at least 20", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			body, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			checkHeadSkipExact(t, body)
		})
	}
}

// headSkips reports whether reading body as a chat stream skips a repeated
// head on any chunk after the first. The events are the sse package's
// Decoder's, as the Meter reads them.
func headSkips(body []byte) bool {
	var m Measurement
	o := &Observer{m: &m, timed: true}
	var (
		d       sse.Decoder
		i       int
		skipped bool
	)
	d.OnEvent = func(ev *sse.Event) {
		first := i == 0
		i++
		data := bytes.TrimSpace(ev.Data)
		if skipped || len(data) == 0 || data[0] != '{' {
			return
		}
		if !first && o.head.skip(view(data)) > 0 {
			skipped = true
			return
		}
		readOpenAIChunk(o, view(data))
	}
	_, _ = d.Write(body) // the decoder never fails a write
	d.Close()
	return skipped
}
