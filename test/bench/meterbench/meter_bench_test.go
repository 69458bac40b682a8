package meterbench_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/simulator"
)

// t0 is the streams' start; the meter is fed explicit times from it.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// writeRecorder keeps every Write of a handler apart: the simulator writes
// and flushes each event on its own, as a token-streaming server does, and
// reverse_proxy hands the meter one Write per flush.
type writeRecorder struct {
	h      http.Header
	status int
	writes [][]byte
}

func (w *writeRecorder) Header() http.Header { return w.h }
func (w *writeRecorder) WriteHeader(s int)   { w.status = s }
func (w *writeRecorder) Flush()              {}
func (w *writeRecorder) Write(p []byte) (int, error) {
	w.writes = append(w.writes, bytes.Clone(p))
	return len(p), nil
}

// tapStreamTokens is the length of the benchmark streams: a long answer, so
// that the per-request work (setup, finish) is spread as thin as it is in
// real traffic and the figure is the per-event cost.
const tapStreamTokens = 500

// simulatedStream is a realistic stream of one wire format: the
// simulator's bytes, write by write, for a 500-token answer.
func simulatedStream(b *testing.B, target, body string) (writes [][]byte, contentType string) {
	b.Helper()
	h := simulator.Handler{Profile: simulator.Profile{
		TimeToFirstToken: caddy.Duration(time.Nanosecond), TokensPerSecond: 1e9, OutputTokens: tapStreamTokens,
	}}
	if err := h.Provision(caddy.Context{}); err != nil {
		b.Fatal(err)
	}
	w := &writeRecorder{h: http.Header{}}
	r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
	if err := h.ServeHTTP(w, r, nil); err != nil || w.status != http.StatusOK {
		b.Fatalf("simulator: status %d, %v", w.status, err)
	}
	return w.writes, w.h.Get("Content-Type")
}

// BenchmarkMeter is the whole meter, bytes in and Measurement out, for every
// wire format the simulator speaks: a Meter set up with the request, a
// 500-token stream fed one write per event as reverse_proxy delivers it,
// and the Finish. ns/event is the op's time over the stream's writes;
// allocs/op, over events/op, is what an event allocates in steady state
// (the per-request allocations are the response model, id and finish
// reasons, copied once).
func BenchmarkMeter(b *testing.B) {
	for _, tc := range []struct {
		name, target, body string
	}{
		{"openai_chat", "/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`},
		{"openai_responses", "/v1/responses", `{"model":"gpt-5","stream":true,"input":"hi"}`},
		{"anthropic_messages", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"gemini_sse", "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
		{"gemini_array", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`},
		{"ollama", "/api/chat", `{"model":"llama3.2","messages":[{"role":"user","content":"hi"}]}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			writes, contentType := simulatedStream(b, tc.target, tc.body)
			path, _, _ := strings.Cut(tc.target, "?")
			d, ok := meter.DialectForPath(path)
			if !ok {
				b.Fatalf("no dialect claims %s", path)
			}
			size := 0
			for _, w := range writes {
				size += len(w)
			}
			body := []byte(tc.body)
			var mt meter.Meter
			run := func() *meter.Measurement {
				mt.Init(d.New(), meter.Options{}, t0)
				mt.Request(path, body, false)
				mt.Response(http.StatusOK, contentType, "")
				at := t0
				for _, w := range writes {
					at = at.Add(time.Millisecond)
					mt.Write(w, at)
				}
				return mt.Finish(at.Add(time.Millisecond), meter.OutcomeUnknown, "")
			}
			// A meter that skipped the events would be fast for nothing.
			if m := run(); m.Outcome != meter.OutcomeCompleted || m.Usage.OutputTokens != tapStreamTokens || m.FirstToken == 0 {
				b.Fatalf("the meter read %d output tokens, outcome %v, first token %v: not the simulator's stream",
					m.Usage.OutputTokens, m.Outcome, m.FirstToken)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				run()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(writes)), "ns/event")
			b.ReportMetric(float64(len(writes)), "events/op")
		})
	}
}

// BenchmarkMeterInterleaved is BenchmarkMeter's OpenAI chat stream as a proxy
// meets it under load: 64 streams at once, each Meter fed one event in
// turn, so that a stream's state and the reading code have gone cold by
// its next event. "thrash" also touches 8 MiB of other memory between
// events, as the proxy's own work for the other streams does (syscalls,
// net/http, reverse_proxy). ns/event times only the Meter's writes, each
// timed on its own, so the thrashing is not counted. In the running proxy
// the same reading costs several times what BenchmarkMeter says; this shows
// how much of that the cold state explains.
func BenchmarkMeterInterleaved(b *testing.B) {
	const streams = 64
	target, body := "/v1/chat/completions", []byte(`{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`)
	writes, contentType := simulatedStream(b, target, string(body))
	d, _ := meter.DialectForPath(target)
	other := make([]byte, 8<<20)
	for _, tc := range []struct {
		name   string
		thrash bool
		batch  int // consecutive events each stream is fed in its turn
	}{{"warm", false, 1}, {"thrash", true, 1}, {"thrash, batches of 8", true, 8}} {
		b.Run(tc.name, func(b *testing.B) {
			meters := make([]meter.Meter, streams)
			var timed time.Duration
			var events int
			var sink byte
			for b.Loop() {
				for i := range meters {
					meters[i].Init(d.New(), meter.Options{}, t0)
					meters[i].Request(target, body, false)
					meters[i].Response(http.StatusOK, contentType, "")
				}
				for k := 0; k < len(writes); k += tc.batch {
					batch := writes[k:min(k+tc.batch, len(writes))]
					for i := range meters {
						if tc.thrash {
							for j := 0; j < len(other); j += 64 {
								other[j]++
							}
							sink += other[i]
						}
						start := time.Now()
						for n, w := range batch {
							meters[i].Write(w, t0.Add(time.Duration(k+n+1)*time.Millisecond))
						}
						timed += time.Since(start)
					}
					events += streams * len(batch)
				}
				at := t0.Add(time.Duration(len(writes)) * time.Millisecond)
				for i := range meters {
					if m := meters[i].Finish(at.Add(time.Millisecond), meter.OutcomeUnknown, ""); m.Usage.OutputTokens != tapStreamTokens {
						b.Fatalf("stream %d: %d output tokens, want %d", i, m.Usage.OutputTokens, tapStreamTokens)
					}
				}
			}
			_ = sink
			b.ReportMetric(float64(timed.Nanoseconds())/float64(events), "ns/event")
		})
	}
}
