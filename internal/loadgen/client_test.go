package loadgen

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/tokentap/tokentap/internal/simulator/stamp"
)

func TestReadEvent(t *testing.T) {
	for _, tc := range []struct {
		name      string
		api       API
		typ, data string
		want      eventKind
		// What the event leaves in the result.
		id, model   string
		tokens      int
		usage       bool
		streamError string
	}{
		{name: "openai role-only chunk", api: OpenAI,
			data: `{"id":"c1","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
			want: eventOther, id: "c1", model: "m"},
		{name: "openai content", api: OpenAI, data: `{"choices":[{"delta":{"content":"Hi"}}]}`, want: eventContent},
		{name: "openai reasoning_content (DeepSeek, vLLM)", api: OpenAI, data: `{"choices":[{"delta":{"reasoning_content":"hmm"}}]}`, want: eventContent},
		{name: "openai reasoning (OpenRouter)", api: OpenAI, data: `{"choices":[{"delta":{"reasoning":"hmm"}}]}`, want: eventContent},
		{name: "openai refusal", api: OpenAI, data: `{"choices":[{"delta":{"refusal":"No"}}]}`, want: eventContent},
		{name: "openai tool call", api: OpenAI, data: `{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}`, want: eventContent},
		{name: "openai second choice has content", api: OpenAI, data: `{"choices":[{"delta":{}},{"delta":{"content":"x"}}]}`, want: eventContent},
		{name: "openai finish", api: OpenAI, data: `{"choices":[{"delta":{},"finish_reason":"stop"}]}`, want: eventOther},
		{name: "openai usage chunk", api: OpenAI, data: `{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":42}}`, want: eventOther, tokens: 42, usage: true},
		{name: "openai null usage", api: OpenAI, data: `{"choices":[{"delta":{"content":"a"}}],"usage":null}`, want: eventContent},
		{name: "openai done", api: OpenAI, data: `[DONE]`, want: eventDone},
		{name: "openai error", api: OpenAI, data: `{"error":{"message":"overloaded","type":"server_error"}}`, want: eventError, streamError: "overloaded"},
		{name: "openai error without message", api: OpenAI, data: `{"error":"boom"}`, want: eventError, streamError: `"boom"`},
		{name: "anthropic message_start", api: Anthropic, typ: "message_start",
			data: `{"type":"message_start","message":{"id":"msg_1","model":"claude","usage":{"input_tokens":3,"output_tokens":1}}}`,
			want: eventOther, id: "msg_1", model: "claude"},
		{name: "anthropic text delta", api: Anthropic, typ: "content_block_delta", data: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`, want: eventContent},
		{name: "anthropic thinking delta", api: Anthropic, typ: "content_block_delta", data: `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`, want: eventContent},
		{name: "anthropic tool input delta", api: Anthropic, typ: "content_block_delta", data: `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}`, want: eventContent},
		{name: "anthropic signature delta is not output", api: Anthropic, typ: "content_block_delta", data: `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc"}}`, want: eventOther},
		{name: "anthropic typed by data only", api: Anthropic, data: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`, want: eventContent},
		{name: "anthropic ping", api: Anthropic, typ: "ping", data: `{"type": "ping"}`, want: eventOther},
		{name: "anthropic message_delta usage", api: Anthropic, typ: "message_delta", data: `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":17}}`, want: eventOther, tokens: 17, usage: true},
		{name: "anthropic message_stop", api: Anthropic, typ: "message_stop", data: `{"type":"message_stop"}`, want: eventDone},
		{name: "anthropic error", api: Anthropic, typ: "error", data: `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`, want: eventError, streamError: "Overloaded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Result
			got := readEvent(tc.api, []byte(tc.typ), []byte(tc.data), &r)
			if got != tc.want || r.ResponseID != tc.id || r.ResponseModel != tc.model ||
				r.OutputTokens != tc.tokens || r.UsageReported != tc.usage || r.StreamError != tc.streamError {
				t.Errorf("kind %d, id %q, model %q, tokens %d (usage %v), error %q; want %d, %q, %q, %d (%v), %q",
					got, r.ResponseID, r.ResponseModel, r.OutputTokens, r.UsageReported, r.StreamError,
					tc.want, tc.id, tc.model, tc.tokens, tc.usage, tc.streamError)
			}
		})
	}
}

// TestReadFraming feeds whole bodies to the stream reader: framing, not
// timing, is what is checked, so every event arrives in one read.
func TestReadFraming(t *testing.T) {
	openaiContent := `data: {"choices":[{"delta":{"content":"a"}}]}`
	stampLine := stamp.Prefix + "1000"
	for _, tc := range []struct {
		name            string
		api             API
		body            string
		events, content int
		delays          int
		errorKind       string
		tokens          int
	}{
		{name: "lf", body: openaiContent + "\n\n" + openaiContent + "\n\ndata: [DONE]\n\n", events: 3, content: 2, tokens: 2},
		{name: "crlf", body: openaiContent + "\r\n\r\n" + openaiContent + "\r\n\r\ndata: [DONE]\r\n\r\n", events: 3, content: 2, tokens: 2},
		{name: "bare cr", body: openaiContent + "\r\r" + openaiContent + "\r\rdata: [DONE]\r\r", events: 3, content: 2, tokens: 2},
		{name: "mixed line ends", body: openaiContent + "\r\n\r" + openaiContent + "\n\rdata: [DONE]\r\n\n", events: 3, content: 2, tokens: 2},
		{name: "a BOM at the start is skipped", body: "\xEF\xBB\xBF" + openaiContent + "\n\ndata: [DONE]\n\n", events: 2, content: 1, tokens: 1},
		{name: "a BOM after the start is a field name's", body: openaiContent + "\n\n\xEF\xBB\xBF" + openaiContent + "\n\ndata: [DONE]\n\n", events: 2, content: 1, tokens: 1},
		{name: "no space after the colon", body: `data:{"choices":[{"delta":{"content":"a"}}]}` + "\n\ndata:[DONE]\n\n", events: 2, content: 1, tokens: 1},
		{name: "keep-alive comments and unknown fields", body: ": ping\n\nid: 7\nretry: 10\n" + openaiContent + "\n\n: ping\ndata: [DONE]\n\n", events: 2, content: 1, tokens: 1},
		{name: "blank lines without data dispatch nothing", body: "\n\n\n" + openaiContent + "\n\n\n\ndata: [DONE]\n\n", events: 2, content: 1, tokens: 1},
		{name: "multi-line data joins with newline", body: "data: {\"choices\":\ndata: [{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n", events: 2, content: 1, tokens: 1},
		{name: "last event without its blank line (llama.cpp)", body: openaiContent + "\n\ndata: [DONE]", events: 2, content: 1, tokens: 1},
		{name: "no end marker", body: openaiContent + "\n\n" + openaiContent + "\n\n", events: 2, content: 2, tokens: 2, errorKind: ErrTruncated},
		{name: "stamps date the events after them", body: stampLine + "\n" + openaiContent + "\n\n" + openaiContent + "\n\n" + stampLine + "\ndata: [DONE]\n\n", events: 3, content: 2, delays: 3, tokens: 2},
		{name: "events before the first stamp have no delay", body: openaiContent + "\n\n" + stampLine + "\ndata: [DONE]\n\n", events: 2, content: 1, delays: 1, tokens: 1},
		{name: "a line longer than the read buffer", body: `data: {"choices":[{"delta":{"content":"` + strings.Repeat("x", 3*readBufferSize) + `"}}]}` + "\n\ndata: [DONE]\n\n", events: 2, content: 1, tokens: 1},
		{name: "a line over the cap", body: "data: " + strings.Repeat("x", maxEvent+1) + "\n\n", errorKind: ErrUnreadable},
		{name: "anthropic event lines", api: Anthropic,
			body:   "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\nevent: content_block_delta\ndata: {\"delta\":{\"text\":\"a\"}}\n\nevent: message_delta\ndata: {\"usage\":{\"output_tokens\":9}}\n\nevent: message_stop\ndata: {}\n\n",
			events: 4, content: 1, tokens: 9},
		{name: "an event type does not leak into the next event", api: Anthropic,
			body:   "event: ping\n\ndata: {\"type\":\"message_stop\"}\n\n",
			events: 1, content: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := tc.api
			if api == "" {
				api = OpenAI
			}
			// Whole, and one byte a read: a CRLF split between reads, or a
			// line across many, must read the same.
			for _, body := range []io.Reader{strings.NewReader(tc.body), iotest.OneByteReader(strings.NewReader(tc.body))} {
				r := &Result{Start: time.Now()}
				r.read(context.Background(), api, body)
				if r.Events != tc.events || r.ContentEvents != tc.content || len(r.Delays) != tc.delays ||
					r.ErrorKind != tc.errorKind || r.OutputTokens != tc.tokens {
					t.Errorf("%T: %d events, %d with content, %d delays, %d tokens, error %q (%s); want %d, %d, %d, %d, %q",
						body, r.Events, r.ContentEvents, len(r.Delays), r.OutputTokens, r.ErrorKind, r.Error,
						tc.events, tc.content, tc.delays, tc.tokens, tc.errorKind)
				}
			}
			r := &Result{Start: time.Now()}
			r.read(context.Background(), api, strings.NewReader(tc.body))
			for _, d := range r.Delays {
				// The stamps are 1000 ns after the epoch: the delay is the
				// time since then, which says the stamp, not the arrival
				// alone, was used.
				if want := time.Since(time.Unix(0, 1000)); d < want-time.Hour || d > want {
					t.Errorf("delay %v, want about %v", d, want)
				}
			}
		})
	}
}

// TestRequestHeaders checks what reaches the server: the API's own headers,
// the caller's overriding them whatever the spelling of their names, and a
// Host header turned into the request's host.
func TestRequestHeaders(t *testing.T) {
	got := make(chan http.Header, 1)
	hosts := make(chan string, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:9361")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		hosts <- r.Host
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message_stop\ndata: {}\n\n")
	}))
	srv.Listener = ln
	srv.Start()
	defer srv.Close()

	hdr := http.Header{}
	hdr["anthropic-version"] = []string{"2099-01-01"} // not canonical, as a caller may build it
	hdr.Set("X-Api-Key", "k")
	hdr.Set("Host", "api.example.com")
	rep, err := Run(context.Background(), Config{URL: srv.URL, API: Anthropic, Models: []string{"m"}, Requests: 1, Header: hdr})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.Succeeded != 1 {
		t.Fatalf("report %+v", rep.Total)
	}
	h := <-got
	for name, want := range map[string]string{
		"Anthropic-Version": "2099-01-01",
		"X-Api-Key":         "k",
		"Content-Type":      "application/json",
		"Accept":            "text/event-stream",
	} {
		if vs := h.Values(name); len(vs) != 1 || vs[0] != want {
			t.Errorf("%s: %q, want just %q", name, vs, want)
		}
	}
	if host := <-hosts; host != "api.example.com" {
		t.Errorf("host %q, want api.example.com", host)
	}
}

// TestReadTimesBareCR: a line ended by a bare CR is read when the read that
// ends it returns, not when a later LF or the end of the stream comes, so
// a stream ending its lines that way is timed event by event.
func TestReadTimesBareCR(t *testing.T) {
	const gap = 50 * time.Millisecond
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte(`data: {"choices":[{"delta":{"content":"a"}}]}` + "\r\r"))
		time.Sleep(gap)
		_, _ = pw.Write([]byte("data: [DONE]\r\r"))
		pw.Close()
	}()
	r := &Result{Start: time.Now()}
	r.read(context.Background(), OpenAI, pr)
	if !r.OK() || r.ContentEvents != 1 {
		t.Fatalf("%d content events, error %q (%s)", r.ContentEvents, r.ErrorKind, r.Error)
	}
	// The first token came a gap before the end; read at the end, it
	// would be dated with it.
	if d := r.End - r.FirstToken; d < gap*3/5 {
		t.Errorf("first token %v, end %v: the event was dated %v before the end, want about %v", r.FirstToken, r.End, d, gap)
	}
}

// BenchmarkRead times the client's reading of a 500-event OpenAI chat
// stream, whole in one read and in reads of 256 bytes, the client's own
// cost per event in what it measures.
func BenchmarkRead(b *testing.B) {
	var sb strings.Builder
	for i := range 500 {
		sb.WriteString(`data: {"id":"c1","model":"m","choices":[{"delta":{"content":" ` + simWords[i%len(simWords)] + `"}}]}` + "\n\n")
	}
	sb.WriteString("data: {\"choices\":[],\"usage\":{\"completion_tokens\":500}}\n\ndata: [DONE]\n\n")
	body := []byte(sb.String())
	for _, chunk := range []int{0, 256} {
		b.Run(fmt.Sprintf("reads of %d bytes", chunk), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				r := &Result{}
				r.read(context.Background(), OpenAI, &chunkReader{b: body, n: chunk})
				if r.ContentEvents != 500 {
					b.Fatalf("%d content events", r.ContentEvents)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*502), "ns/event")
		})
	}
}
