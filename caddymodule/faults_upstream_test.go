package caddymodule

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// faultsUpstream is an upstream that misbehaves on demand: each test
// registers what the upstream does for a path, and the proxy forwards to
// it. It listens on the fault tests' upstream port.
type faultsUpstream struct {
	mu       sync.Mutex
	handlers map[string]http.HandlerFunc
	srv      *http.Server
}

func startFaultsUpstream(t *testing.T) *faultsUpstream {
	t.Helper()
	u := &faultsUpstream{handlers: map[string]http.HandlerFunc{}}
	u.srv = &http.Server{Handler: u, ReadHeaderTimeout: 10 * time.Second}
	ln := listenFaults(t, faultsUpstreamAddr)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = u.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = u.srv.Close()
		<-done
	})
	return u
}

// handle makes the upstream answer requests for path with h.
func (u *faultsUpstream) handle(path string, h http.HandlerFunc) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.handlers[path] = h
}

func (u *faultsUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	h := u.handlers[r.URL.Path]
	u.mu.Unlock()
	if h == nil {
		http.Error(w, "no such fault: "+r.URL.Path, http.StatusNotFound)
		return
	}
	h(w, r)
}

// chatEvent is one OpenAI chat completion chunk as an SSE event.
func chatEvent(model, content string) []byte {
	return []byte(`data: {"id":"chatcmpl-faults","object":"chat.completion.chunk","created":1,"model":"` + model +
		`","choices":[{"index":0,"delta":{"content":"` + content + `"},"finish_reason":null}]}` + "\n\n")
}

// chatStream is a complete chat stream: n content events of one word,
// the finish event, usage and [DONE].
func chatStream(model string, n int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		b.Write(chatEvent(model, " word"))
	}
	b.WriteString(chatTail(model, n))
	return b.Bytes()
}

func chatTail(model string, n int) string {
	return `data: {"id":"chatcmpl-faults","object":"chat.completion.chunk","created":1,"model":"` + model +
		`","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"id":"chatcmpl-faults","object":"chat.completion.chunk","created":1,"model":"` + model +
		`","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":` + fmt.Sprint(n) + `,"total_tokens":` + fmt.Sprint(7+n) + `}}` + "\n\n" +
		"data: [DONE]\n\n"
}

// writeFlushed writes body in pieces of at most piece bytes, flushing each,
// and reports whether every write succeeded.
func writeFlushed(w http.ResponseWriter, body []byte, piece int) bool {
	rc := http.NewResponseController(w)
	for len(body) > 0 {
		n := min(piece, len(body))
		if _, err := w.Write(body[:n]); err != nil {
			return false
		}
		if err := rc.Flush(); err != nil {
			return false
		}
		body = body[n:]
	}
	return true
}

// faultsClient talks HTTP/1.1 to the proxy and never asks for compression,
// so the bytes it reads are the bytes on the wire.
func faultsClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64}}
}

// upstreamFault is one way an upstream misbehaves, and what the client and
// the span must see.
type upstreamFault struct {
	name string
	// route is the proxy route: "up" (plain reverse_proxy) or "slowup"
	// (reverse_proxy with a 500 ms read timeout).
	route string
	// status and contentType are what the upstream answers with.
	status      int
	contentType string
	// body is what the upstream sends, in 16 KiB flushed pieces.
	body []byte
	// then is what the upstream does after sending body: "" returns
	// (ending the body cleanly), "reset" waits until the client has read
	// body and resets the connection, "hang" waits until the request is
	// cancelled.
	then string
	// clientTimeout, when set, makes the client give up that long after
	// it has read body.
	clientTimeout time.Duration

	wantReadErr     bool
	wantOutcome     string
	wantErrorType   string // "" means absent
	wantDegraded    string // "" means absent
	wantSpanError   bool
	wantOutputFound bool // gen_ai.usage.output_tokens must be set
	// wantTokens and wantSource, when wantOutputFound, are the output
	// tokens and their tokentap.usage.source.
	wantTokens int64
	wantSource string
	// wantChunks is tokentap.chunks (-1: absent).
	wantChunks int64
	// wantModel, when set, is gen_ai.response.model as exported.
	wantModel string
	// minElapsed, when set, is the least time before the client's read
	// ends: the proxy's timeout, not something sooner, ended it.
	minElapsed time.Duration
	// maxAlloc bounds the bytes the whole process allocates while the
	// exchange runs (0: not checked): proof that tokentap does not
	// buffer what it cannot measure.
	maxAlloc uint64
}

// TestUpstreamFaults: for every way an upstream misbehaves, the client gets
// exactly the bytes the upstream sent (sha256), and the span, as exported
// over OTLP, ends with an outcome that says what happened.
func TestUpstreamFaults(t *testing.T) {
	sink, up := startFaultsStack(t, `
http://`+faultsProxyAddr+` {
	bind 127.0.0.1
	handle_path /up/* {
		tokentap
		reverse_proxy `+faultsUpstreamAddr+`
	}
	handle_path /slowup/* {
		tokentap
		reverse_proxy `+faultsUpstreamAddr+` {
			transport http {
				read_timeout 500ms
			}
		}
	}
}
`)

	const model = "gpt-faults"
	five := bytes.Repeat(chatEvent(model, " word"), 5)
	openaiError := []byte(`{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`)

	// One event of 10 MiB on one line, between ordinary ones: over the
	// default max_event_size (1 MiB), so the measurement skips it.
	var huge bytes.Buffer
	huge.Write(bytes.Repeat(chatEvent(model, " word"), 3))
	huge.WriteString(`data: {"id":"chatcmpl-faults","object":"chat.completion.chunk","created":1,"model":"` + model + `","choices":[{"index":0,"delta":{"content":"`)
	huge.Write(bytes.Repeat([]byte("x"), 10<<20))
	huge.WriteString(`"},"finish_reason":null}]}` + "\n\n")
	huge.Write(bytes.Repeat(chatEvent(model, " word"), 2))
	huge.WriteString(chatTail(model, 6))

	// One delta of 256 KiB of a single character: the tokenizer's worst
	// case (no pre-split point), in a request that asks for no usage. A
	// delta that long goes to the heuristic instead (meter's
	// maxTokenizedDelta); tokenized, it holds its bytes back for over
	// 100 ms and allocates 12 MiB, which maxAlloc catches.
	var run bytes.Buffer
	run.Write(bytes.Repeat(chatEvent(model, " word"), 3))
	run.Write(chatEvent(model, " "+strings.Repeat("=", 256<<10)))
	run.WriteString(chatTail(model, 4))

	garbage := make([]byte, 4<<20)
	rnd := rand.New(rand.NewPCG(5, 5))
	for i := range garbage {
		garbage[i] = byte(rnd.UintN(256))
	}

	// Invalid UTF-8 in the model name, the id and the text: the bytes pass
	// as they are, and the span's strings must still be valid, or OTLP
	// would refuse the whole batch the span is in.
	badModel := "gpt-\xff\xfe-faults"
	var invalid bytes.Buffer
	invalid.WriteString(`data: {"id":"chatcmpl-\xc3\x28","object":"chat.completion.chunk","created":1,"model":"` + badModel + `","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	for _, s := range []string{" \xc3\x28", " ok", " \xe2\x82", " \xf0\x28\x8c\x28"} {
		invalid.Write(chatEvent(badModel, s))
	}
	invalid.WriteString(chatTail(badModel, 4))

	faults := []upstreamFault{
		{
			name: "reset mid-stream", route: "up", status: 200, contentType: "text/event-stream",
			body: five, then: "reset",
			wantReadErr: true, wantOutcome: "upstream_error", wantErrorType: "stream_aborted", wantSpanError: true, wantOutputFound: true,
			wantTokens: 5, wantSource: "estimated", wantChunks: 5,
		},
		{
			name: "hang mid-stream, the client gives up", route: "up", status: 200, contentType: "text/event-stream",
			body: five, then: "hang", clientTimeout: 300 * time.Millisecond,
			wantReadErr: true, wantOutcome: "client_abort", wantOutputFound: true,
			wantTokens: 5, wantSource: "estimated", wantChunks: 5,
		},
		{
			name: "hang mid-stream, the proxy's read timeout", route: "slowup", status: 200, contentType: "text/event-stream",
			body: five, then: "hang",
			wantReadErr: true, wantOutcome: "upstream_error", wantErrorType: "stream_aborted", wantSpanError: true, wantOutputFound: true,
			wantTokens: 5, wantSource: "estimated", wantChunks: 5,
			minElapsed: 500 * time.Millisecond,
		},
		{
			name: "truncated without terminator", route: "up", status: 200, contentType: "text/event-stream",
			body:        five,
			wantOutcome: "truncated", wantErrorType: "truncated", wantSpanError: true, wantOutputFound: true,
			wantTokens: 5, wantSource: "estimated", wantChunks: 5,
		},
		{
			name: "error status with a body", route: "up", status: 500, contentType: "application/json",
			body:        openaiError,
			wantOutcome: "upstream_error", wantErrorType: "500", wantSpanError: true,
			wantChunks: -1,
		},
		{
			name: "error status without a body", route: "up", status: 503,
			wantOutcome: "upstream_error", wantErrorType: "503", wantSpanError: true,
			wantChunks: -1,
		},
		{
			name: "JSON labelled text/event-stream", route: "up", status: 200, contentType: "text/event-stream",
			body:        fixture(t, "../../meter/testdata/openai/chat_completion.json"),
			wantOutcome: "truncated", wantErrorType: "truncated", wantSpanError: true,
			wantChunks: 0,
		},
		{
			name: "an event stream labelled application/json", route: "up", status: 200, contentType: "application/json",
			body:        chatStream(model, 5),
			wantOutcome: "completed", wantDegraded: "body_not_json",
			wantChunks: -1,
		},
		{
			name: "invalid UTF-8", route: "up", status: 200, contentType: "text/event-stream",
			body:        invalid.Bytes(),
			wantOutcome: "completed", wantOutputFound: true,
			wantTokens: 4, wantSource: "reported", wantChunks: 8,
			// Each run of invalid bytes becomes one U+FFFD before
			// export.
			wantModel: "gpt-\uFFFD-faults",
		},
		{
			name: "one 10 MiB event on one line", route: "up", status: 200, contentType: "text/event-stream",
			body:        huge.Bytes(),
			wantOutcome: "completed", wantDegraded: "event_over_cap", wantOutputFound: true,
			// Every event but the one over the cap: 5 deltas, the
			// finish, the usage and [DONE].
			wantTokens: 6, wantSource: "reported", wantChunks: 8,
			// The SSE decoder grows its line buffer to the 1 MiB cap
			// before it gives the event up (about 5 MiB of allocations
			// in all); holding the event would take over 10 MiB.
			maxAlloc: 8 << 20,
		},
		{
			name: "a 256 KiB delta of one repeated character", route: "up", status: 200, contentType: "text/event-stream",
			body:        run.Bytes(),
			wantOutcome: "completed", wantOutputFound: true,
			wantTokens: 4, wantSource: "reported", wantChunks: 7,
			// Measuring it allocates about half this bound, with
			// and without -race.
			maxAlloc: 3 << 20,
		},
		{
			name: "binary garbage labelled text/event-stream", route: "up", status: 200, contentType: "text/event-stream",
			body:        garbage,
			wantOutcome: "truncated", wantErrorType: "truncated", wantSpanError: true,
			wantChunks: 0,
			// About what an exchange of a few bytes allocates, with
			// and without -race; the bound is twice the most seen.
			maxAlloc: 480 << 10,
		},
	}
	client := faultsClient()
	defer client.CloseIdleConnections()
	for i, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			path := fmt.Sprintf("/fault%d", i)
			clientRead := make(chan struct{})
			upstreamDone := make(chan string, 1)
			up.handle(path, func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if f.contentType != "" {
					w.Header().Set("Content-Type", f.contentType)
				}
				if f.body == nil {
					w.Header().Set("Content-Length", "0")
				}
				w.WriteHeader(f.status)
				if !writeFlushed(w, f.body, 16<<10) {
					upstreamDone <- "write failed"
					return
				}
				switch f.then {
				case "reset":
					select {
					case <-clientRead:
					case <-time.After(10 * time.Second):
					}
					conn, _, err := http.NewResponseController(w).Hijack()
					if err != nil {
						upstreamDone <- "hijack: " + err.Error()
						return
					}
					// SO_LINGER 0: close sends a TCP RST, as a crashed
					// upstream's kernel does.
					_ = conn.(*net.TCPConn).SetLinger(0)
					_ = conn.Close()
					upstreamDone <- "reset"
				case "hang":
					select {
					case <-r.Context().Done():
						upstreamDone <- "cancelled"
					case <-time.After(20 * time.Second):
						upstreamDone <- "never cancelled"
					}
				default:
					upstreamDone <- "done"
				}
			})

			tc := newTraceContext(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", faultsProxyURL+"/"+f.route+path,
				strings.NewReader(`{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("traceparent", tc.header)

			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != f.status {
				t.Errorf("client got status %d, upstream sent %d", resp.StatusCode, f.status)
			}
			h := sha256.New()
			var got int64
			var readErr error
			if f.then != "" {
				// Read exactly what was sent, then let the upstream
				// misbehave.
				n, err := io.CopyN(h, resp.Body, int64(len(f.body)))
				got += n
				if err != nil {
					t.Fatalf("reading the %d bytes sent before the fault: %v after %d", len(f.body), err, n)
				}
				close(clientRead)
				if f.clientTimeout > 0 {
					time.AfterFunc(f.clientTimeout, cancel)
				}
			}
			n, err := io.Copy(h, resp.Body)
			got += n
			readErr = err
			resp.Body.Close()
			elapsed := time.Since(start)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)

			if (readErr != nil) != f.wantReadErr {
				t.Errorf("client read error %v, want an error: %v", readErr, f.wantReadErr)
			}
			if sum, want := h.Sum(nil), sha256.Sum256(f.body); !bytes.Equal(sum, want[:]) || got != int64(len(f.body)) {
				t.Errorf("client got %d bytes (sha256 %x), upstream sent %d (sha256 %x)", got, sum[:6], len(f.body), want[:6])
			}
			select {
			case what := <-upstreamDone:
				if f.then == "hang" && what != "cancelled" {
					t.Errorf("upstream after the fault: %s, want its request cancelled", what)
				}
			case <-time.After(10 * time.Second):
				t.Error("the upstream handler did not finish")
			}

			span := waitSpan(t, sink, tc, 10*time.Second)
			a := span.Attributes
			if a["tokentap.outcome"] != f.wantOutcome {
				t.Errorf("outcome %v, want %s", a["tokentap.outcome"], f.wantOutcome)
			}
			if et, ok := a["error.type"]; f.wantErrorType == "" && ok || f.wantErrorType != "" && et != f.wantErrorType {
				t.Errorf("error.type %v, want %q", et, f.wantErrorType)
			}
			if dr, ok := a["tokentap.degraded.reason"]; f.wantDegraded == "" && ok || f.wantDegraded != "" && dr != f.wantDegraded {
				t.Errorf("tokentap.degraded.reason %v, want %q", dr, f.wantDegraded)
			}
			if isErr := span.StatusCode == "error"; isErr != f.wantSpanError {
				t.Errorf("span status %q (%q), want error: %v", span.StatusCode, span.StatusMessage, f.wantSpanError)
			}
			if _, ok := a["gen_ai.usage.output_tokens"]; ok != f.wantOutputFound {
				t.Errorf("gen_ai.usage.output_tokens %v, want it set: %v", a["gen_ai.usage.output_tokens"], f.wantOutputFound)
			} else if ok && (a["gen_ai.usage.output_tokens"] != f.wantTokens || a["tokentap.usage.source"] != f.wantSource) {
				t.Errorf("output tokens %v (%v), want %d (%s)", a["gen_ai.usage.output_tokens"], a["tokentap.usage.source"], f.wantTokens, f.wantSource)
			}
			if c, ok := a["tokentap.chunks"]; f.wantChunks < 0 && ok || f.wantChunks >= 0 && c != f.wantChunks {
				t.Errorf("tokentap.chunks %v, want %d (-1: absent)", c, f.wantChunks)
			}
			if f.wantModel != "" && a["gen_ai.response.model"] != f.wantModel {
				t.Errorf("gen_ai.response.model %q, want %q", a["gen_ai.response.model"], f.wantModel)
			}
			if elapsed < f.minElapsed {
				t.Errorf("the client's read ended after %v, before the %v timeout", elapsed, f.minElapsed)
			}
			if a["http.response.status_code"] != int64(f.status) {
				t.Errorf("http.response.status_code %v, want %d", a["http.response.status_code"], f.status)
			}
			for k, v := range a {
				if s, ok := v.(string); ok && !utf8.ValidString(s) {
					t.Errorf("attribute %s = %q is not valid UTF-8", k, s)
				}
			}
			if !utf8.ValidString(span.Name) {
				t.Errorf("span name %q is not valid UTF-8", span.Name)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			if f.maxAlloc > 0 && alloc > f.maxAlloc {
				t.Errorf("the process allocated %d KiB while %d KiB passed: something buffered what it could not measure", alloc>>10, len(f.body)>>10)
			}
			t.Logf("client got %d bytes in %v, sha256 %x (identical); span: outcome %v, error.type %v, degraded %v (%v), output tokens %v (%v), chunks %v, overhead %.2f ms; process allocated %d KiB",
				got, elapsed.Round(time.Microsecond), sha256Of(f.body)[:6], a["tokentap.outcome"], a["error.type"], a["tokentap.degraded"], a["tokentap.degraded.reason"],
				a["gen_ai.usage.output_tokens"], a["tokentap.usage.source"], a["tokentap.chunks"], 1000*floatAttr(a["tokentap.overhead"]), alloc>>10)
		})
	}
}

func floatAttr(v any) float64 {
	f, _ := v.(float64)
	return f
}

func sha256Of(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}
