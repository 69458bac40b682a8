package caddymodule

import (
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/klauspost/compress/zstd"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// compressedTimingConfig puts tokentap in front of an upstream of the
// test's own, which sends the same paced stream plain or compressed.
const compressedTimingConfig = `{
	skip_install_trust
	admin localhost:2999
	http_port 9080
	https_port 9443
}

http://localhost:9080 {
	handle_path /up/* {
		tokentap
		reverse_proxy %s
	}
}
`

// streamEncoder is a Content-Encoding as a provider's server writes it: a
// compressor flushed after every event, so each event leaves at once.
// Each is made once and reset for every stream, as servers pool them:
// a new zstd or brotli writer spends milliseconds on its tables at its
// first write, which would be the upstream's delay, not tokentap's. The
// test's upstream serves one stream at a time, so one of each is enough.
type streamEncoder struct {
	name  string
	reset func(w io.Writer) (io.Writer, func() error)
}

var streamEncoders = func() []streamEncoder {
	gz := gzip.NewWriter(nil)
	zl := zlib.NewWriter(nil)
	br := brotli.NewWriter(nil)
	zs, _ := zstd.NewWriter(nil)
	return []streamEncoder{
		{"identity", nil},
		{"gzip", func(w io.Writer) (io.Writer, func() error) { gz.Reset(w); return gz, gz.Flush }},
		{"deflate", func(w io.Writer) (io.Writer, func() error) { zl.Reset(w); return zl, zl.Flush }},
		{"br", func(w io.Writer) (io.Writer, func() error) { br.Reset(w); return br, br.Flush }},
		{"zstd", func(w io.Writer) (io.Writer, func() error) { zs.Reset(w); return zs, zs.Flush }},
	}
}()

const (
	compressedTimingStreams = 5
	compressedTimingTokens  = 30
	compressedTimingTTFT    = 100 * time.Millisecond
	compressedTimingGap     = 20 * time.Millisecond
)

// TestCompressedTimingThroughCaddy: a stream compressed by its upstream
// (gzip, deflate, br, zstd, each flushed after every event as Go's and
// nginx's writers do) is timed as the same stream sent plain, through a
// real reverse_proxy: the median over 5 rounds of the difference in time to
// first chunk and to first token within 1 ms, of output tokens/s within
// 1 %. Decompressing late (an event held until the next compressed write)
// would put the first token one event, 20 ms, late and skew the rate.
//
// Each round sends every encoding in turn, so that the machine's load
// falls on all of them alike; the median, as TestTimingAccuracy explains,
// is what a dialect's error moves and noise does not.
func TestCompressedTimingThroughCaddy(t *testing.T) {
	if raceEnabled || os.Getenv("TOKENTAP_TIMING_TESTS") != "1" {
		t.Skip("set TOKENTAP_TIMING_TESTS=1 and run alone, without -race (as .ci/run does)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := &http.Server{Handler: http.HandlerFunc(pacedCompressedStream)}
	go func() { _ = up.Serve(ln) }()
	t.Cleanup(func() { _ = up.Close() })
	tester := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{TestRequestTimeout: 30 * time.Second})
	tester.InitServer(fmt.Sprintf(compressedTimingConfig, ln.Addr()), "caddyfile")
	rec := integrationSpans

	type timing struct{ chunk, token, rate float64 }
	run := func(enc string) timing {
		before := len(rec.Ended())
		req, _ := http.NewRequest("POST", "http://localhost:9080/up/v1/chat/completions",
			strings.NewReader(`{"model":"m","stream":true,"stream_options":{"include_usage":true}}`))
		req.Header.Set("Content-Type", "application/json")
		// Set by hand, so that Go's client leaves the body as sent.
		req.Header.Set("Accept-Encoding", enc)
		resp, err := tester.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		wantCE := enc
		if enc == "identity" {
			wantCE = ""
		}
		if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != wantCE {
			t.Fatalf("%s: status %d, Content-Encoding %q, %v", enc, resp.StatusCode, resp.Header.Get("Content-Encoding"), err)
		}
		a := attrs(waitSpans(t, rec, before+1)[before])
		if got := a["gen_ai.usage.output_tokens"].AsInt64(); got != compressedTimingTokens {
			t.Fatalf("%s: %d output tokens, want %d", enc, got, compressedTimingTokens)
		}
		// Each measured time less the moment the upstream sent it, and the
		// measured rate over the rate it sent at.
		sentChunk := trailerSeconds(t, resp, "X-Sent-First-Chunk")
		sentFirst := trailerSeconds(t, resp, "X-Sent-First-Token")
		sentRate := (compressedTimingTokens - 1) / (trailerSeconds(t, resp, "X-Sent-Last-Token") - sentFirst)
		return timing{
			a[semconv.GenAIResponseTimeToFirstChunkKey].AsFloat64() - sentChunk,
			a[attrTimeToFirstToken].AsFloat64() - sentFirst,
			a[attrOutputTokensPerSecond].AsFloat64() / sentRate,
		}
	}
	// Warm the connections, and each encoder's and decoder's tables.
	for _, e := range streamEncoders {
		run(e.name)
	}
	diffs := make(map[string][][3]float64)
	logs := make(map[string][]string) // each round's line, shown after a failure
	for round := 0; round < compressedTimingStreams; round++ {
		var plain timing
		for _, e := range streamEncoders {
			got := run(e.name)
			if e.reset == nil {
				plain = got
				continue
			}
			d := [3]float64{got.chunk - plain.chunk, got.token - plain.token, got.rate/plain.rate - 1}
			diffs[e.name] = append(diffs[e.name], d)
			logs[e.name] = append(logs[e.name], fmt.Sprintf("round %d %s: after the upstream sent them, first chunk %.2f ms (plain %.2f), first token %.2f ms (plain %.2f); tokens/s %+.2f %% of the sent rate (plain %+.2f %%)",
				round, e.name, 1000*got.chunk, 1000*plain.chunk, 1000*got.token, 1000*plain.token, 100*(got.rate-1), 100*(plain.rate-1)))
		}
	}
	for _, e := range streamEncoders[1:] {
		t.Run(e.name, func(t *testing.T) {
			var chunk, token, rate []float64
			for _, d := range diffs[e.name] {
				chunk, token, rate = append(chunk, math.Abs(d[0])), append(token, math.Abs(d[1])), append(rate, math.Abs(d[2]))
			}
			mc, mt, mr := medianOf(chunk), medianOf(token), medianOf(rate)
			t.Logf("median of %d rounds against plain: |first chunk| %.2f ms, |first token| %.2f ms, |tokens/s| %.2f %%", len(chunk), 1000*mc, 1000*mt, 100*mr)
			if mc > 0.001 || mt > 0.001 {
				t.Errorf("first chunk %.2f ms, first token %.2f ms from plain's, want within 1 ms", 1000*mc, 1000*mt)
			}
			if mr > 0.01 {
				t.Errorf("output tokens/s %.2f %% from plain's, want within 1 %%", 100*mr)
			}
			if t.Failed() {
				for _, l := range logs[e.name] {
					t.Log(l)
				}
			}
		})
	}
}

// pacedCompressedStream answers with an OpenAI chat stream of
// compressedTimingTokens one-word tokens: the role at once, the first token
// after compressedTimingTTFT, then one every compressedTimingGap, compressed
// with the encoding the client accepts and flushed after every event. Its
// trailers say when the first chunk, the first token and the last token
// were written, in seconds after the request came.
func pacedCompressedStream(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	start := time.Now()
	var enc streamEncoder
	for _, e := range streamEncoders {
		if e.name == r.Header.Get("Accept-Encoding") {
			enc = e
		}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Trailer", "X-Sent-First-Chunk, X-Sent-First-Token, X-Sent-Last-Token")
	out, flush := io.Writer(w), func() error { return nil }
	if enc.reset != nil {
		w.Header().Set("Content-Encoding", enc.name)
		// One event compressed to nowhere first: after seconds idle, the
		// encoder's first write after a reset spends up to milliseconds
		// bringing its tables back into cache (brotli's most), after the
		// first chunk's send stamp and before its bytes leave. That is
		// this upstream's delay, which the plain stream does not pay, not
		// tokentap's.
		warm, warmFlush := enc.reset(io.Discard)
		_, _ = io.WriteString(warm, `data: {"id":"chatcmpl-paced","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`+"\n\n")
		_ = warmFlush()
		out, flush = enc.reset(w)
	}
	f := w.(http.Flusher)
	// An event is stamped as it is handed to the writer: what follows,
	// compressing it and the flush, is part of the delay measured, and
	// a stamp after the flush would come late whenever the handler is
	// descheduled once its bytes are out.
	send := func(at time.Duration, ev string) float64 {
		time.Sleep(time.Until(start.Add(at)))
		sent := time.Since(start).Seconds()
		_, _ = io.WriteString(out, "data: "+ev+"\n\n")
		_ = flush()
		f.Flush()
		return sent
	}
	const head = `{"id":"chatcmpl-paced","object":"chat.completion.chunk","model":"m","choices":[`
	var firstToken, lastToken float64
	firstChunk := send(0, head+`{"index":0,"delta":{"role":"assistant","content":""}}]}`)
	for i := 0; i < compressedTimingTokens; i++ {
		lastToken = send(compressedTimingTTFT+time.Duration(i)*compressedTimingGap, head+fmt.Sprintf(`{"index":0,"delta":{"content":" w%d"}}]}`, i))
		if i == 0 {
			firstToken = lastToken
		}
	}
	last := compressedTimingTTFT + (compressedTimingTokens-1)*compressedTimingGap
	send(last, head+`{"index":0,"delta":{},"finish_reason":"stop"}]}`)
	send(last, head+fmt.Sprintf(`],"usage":{"prompt_tokens":5,"completion_tokens":%d,"total_tokens":%d}}`, compressedTimingTokens, compressedTimingTokens+5))
	send(last, "[DONE]")
	if c, ok := out.(io.Closer); ok {
		_ = c.Close()
	}
	w.Header().Set("X-Sent-First-Chunk", fmt.Sprint(firstChunk))
	w.Header().Set("X-Sent-First-Token", fmt.Sprint(firstToken))
	w.Header().Set("X-Sent-Last-Token", fmt.Sprint(lastToken))
}
