package caddymodule

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
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
// Each is made once and reset for every stream, as servers pool them. The
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
	compressedTimingStreams = 7
	compressedTimingTokens  = 30
	compressedTimingTTFT    = 100 * time.Millisecond
	compressedTimingGap     = 20 * time.Millisecond
)

// The bounds on the median stream of each encoding. From the moment the
// upstream handed an event's bytes to its connection to the moment
// tokentap timed it lie loopback, Caddy's read and copy, and the
// scheduling of three processes' goroutines on two cores, none of them
// tokentap's. With a build or a busy loop on both cores besides, the
// median stream stays well under a millisecond and under half the rate
// bound, while single streams come tens of milliseconds late: the bounds
// leave the median room for a slower machine and stay well below the
// fault they guard. An event held until the next compressed write would
// be one event late in every stream: 20 ms for the first token, 100 ms
// for the first chunk, and the rate over 3 % off, the last token being
// sent with the events that end the stream.
const (
	compressedDelayBound = 2 * time.Millisecond
	compressedRateBound  = 0.005
)

// compressedSample is one stream as tokentap timed it against the
// upstream's sends: each time tokentap measured less the moment the
// upstream sent that event, and the measured tokens/s over the rate the
// tokens were sent at, less 1.
type compressedSample struct {
	chunk, token, last, rate float64
	log                      string
	problems                 []string
}

// TestCompressedTimingThroughCaddy: a stream compressed by its upstream
// (gzip, deflate, br, zstd, each flushed after every event as Go's and
// nginx's writers do) is timed, through a real reverse_proxy, against the
// moments its upstream sent the events, as the same stream sent plain is:
// in every encoding the median of 7 streams has its first chunk and its
// first token timed within 2 ms after the upstream sent them, and its
// output tokens/s within 0.5 % of the rate the tokens were sent at; no
// stream has an event timed before it was sent. Decompressing late (an
// event held until the next compressed write) would put the first token
// one event, 20 ms, late in every stream.
//
// The reference is what the upstream did, stamped as it handed each
// event's bytes (compressed already) to its connection, not another
// measured stream: the difference of two readings carries the noise of
// both. That the decompressed event gets exactly its compressed write's
// arrival time is TestCompressedStreams' (meter), with times of its own
// choosing; here the delay between the two processes is the machine's,
// and the median, as TestTimingAccuracy explains, is what an error of
// tokentap's moves and a burst of load does not (each round sends every
// encoding in turn, so that the load falls on all of them alike).
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

	run := func(round int, enc string) (s compressedSample) {
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
		span := waitSpans(t, rec, before+1)[before]
		a := attrs(span)
		if got := a["gen_ai.usage.output_tokens"].AsInt64(); got != compressedTimingTokens {
			t.Fatalf("%s: %d output tokens, want %d (outcome %s, degraded %q)", enc, got, compressedTimingTokens, a[attrOutcome].AsString(), a[attrDegradedReason].AsString())
		}
		sentChunk := trailerTime(t, resp, "X-Sent-First-Chunk")
		sentFirst := trailerTime(t, resp, "X-Sent-First-Token")
		sentLast := trailerTime(t, resp, "X-Sent-Last-Token")
		sentRate := (compressedTimingTokens - 1) / sentLast.Sub(sentFirst).Seconds()
		start := span.StartTime()
		gotChunk := a[semconv.GenAIResponseTimeToFirstChunkKey].AsFloat64()
		gotFirst := a[attrTimeToFirstToken].AsFloat64()
		gotRate := a[attrOutputTokensPerSecond].AsFloat64()
		gotLast := gotFirst + (compressedTimingTokens-1)/gotRate
		s.chunk = start.Add(secondsDuration(gotChunk)).Sub(sentChunk).Seconds()
		s.token = start.Add(secondsDuration(gotFirst)).Sub(sentFirst).Seconds()
		s.last = start.Add(secondsDuration(gotLast)).Sub(sentLast).Seconds()
		s.rate = gotRate/sentRate - 1
		s.log = fmt.Sprintf("round %d %s: after the upstream sent them, first chunk %+.3f ms, first token %+.3f ms, last token %+.3f ms; tokens/s %.3f, sent at %.3f (%+.3f %%)",
			round, enc, 1000*s.chunk, 1000*s.token, 1000*s.last, gotRate, sentRate, 100*s.rate)
		// Whatever the load, no event reaches tokentap before it was sent.
		const ns = 1e-9 // float rounding of durations in seconds
		if s.chunk < -ns || s.token < -ns || s.last < -1e-6 {
			s.problems = append(s.problems, fmt.Sprintf("round %d: first chunk, first and last token timed %.4f, %.4f and %.4f ms after they were sent, want all >= 0",
				round, 1000*s.chunk, 1000*s.token, 1000*s.last))
		}
		return s
	}
	// Warm the connections, and each encoder's and decoder's tables.
	for _, e := range streamEncoders {
		run(-1, e.name)
	}
	samples := make(map[string][]compressedSample)
	for round := 0; round < compressedTimingStreams; round++ {
		for _, e := range streamEncoders {
			samples[e.name] = append(samples[e.name], run(round, e.name))
		}
	}
	for _, e := range streamEncoders {
		t.Run(e.name, func(t *testing.T) { checkCompressedTiming(t, samples[e.name]) })
	}
}

// checkCompressedTiming fails t when the median stream is further from
// the upstream's sends than the bounds, and on any stream's problems.
// Each stream's line is logged only after a failure.
func checkCompressedTiming(t *testing.T, samples []compressedSample) {
	t.Helper()
	var chunk, token, last, rate []float64
	for _, s := range samples {
		for _, p := range s.problems {
			t.Error(p)
		}
		chunk, token, last, rate = append(chunk, s.chunk), append(token, s.token), append(last, s.last), append(rate, math.Abs(s.rate))
	}
	mc, mt, ml, mr := medianOf(chunk), medianOf(token), medianOf(last), medianOf(rate)
	t.Logf("median of %d streams after the upstream sent them: first chunk %+.3f ms (worst %+.3f), first token %+.3f ms (worst %+.3f), last token %+.3f ms (worst %+.3f); |tokens/s error| %.3f %% (worst %.3f %%)",
		len(samples), 1000*mc, 1000*slices.Max(chunk), 1000*mt, 1000*slices.Max(token), 1000*ml, 1000*slices.Max(last), 100*mr, 100*slices.Max(rate))
	if mc > compressedDelayBound.Seconds() || mt > compressedDelayBound.Seconds() {
		t.Errorf("median first chunk %.3f ms, first token %.3f ms after the upstream sent them, want within %v",
			1000*mc, 1000*mt, compressedDelayBound)
	}
	if mr > compressedRateBound {
		t.Errorf("median output tokens/s error %.3f %% of the rate the tokens were sent at, want within %g %%", 100*mr, 100*compressedRateBound)
	}
	if t.Failed() {
		for _, s := range samples {
			t.Log(s.log)
		}
	}
}

// pacedCompressedStream answers with an OpenAI chat stream of
// compressedTimingTokens one-word tokens: the role at once, the first token
// after compressedTimingTTFT, then one every compressedTimingGap, compressed
// with the encoding the client accepts and flushed after every event. Its
// trailers say when the first chunk, the first token and the last token
// were sent, in Unix nanoseconds.
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
	var buf bytes.Buffer
	out, flush := io.Writer(&buf), func() error { return nil }
	if enc.reset != nil {
		w.Header().Set("Content-Encoding", enc.name)
		out, flush = enc.reset(&buf)
	}
	f := w.(http.Flusher)
	// An event is compressed first and stamped as its bytes are handed to
	// the connection, as the simulator stamps its writes: compressing is
	// this upstream's work (a pooled brotli or zstd writer idle for
	// seconds spends up to milliseconds on its first event), and a stamp
	// after the flush would come late whenever the handler is descheduled
	// once its bytes are out.
	send := func(at time.Duration, ev string) time.Time {
		time.Sleep(time.Until(start.Add(at)))
		buf.Reset()
		_, _ = io.WriteString(out, "data: "+ev+"\n\n")
		_ = flush()
		sent := time.Now()
		_, _ = w.Write(buf.Bytes())
		f.Flush()
		return sent
	}
	const head = `{"id":"chatcmpl-paced","object":"chat.completion.chunk","model":"m","choices":[`
	var firstToken, lastToken time.Time
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
		buf.Reset()
		_ = c.Close()
		_, _ = w.Write(buf.Bytes())
	}
	w.Header().Set("X-Sent-First-Chunk", strconv.FormatInt(firstChunk.UnixNano(), 10))
	w.Header().Set("X-Sent-First-Token", strconv.FormatInt(firstToken.UnixNano(), 10))
	w.Header().Set("X-Sent-Last-Token", strconv.FormatInt(lastToken.UnixNano(), 10))
}

// trailerTime reads a trailer of Unix nanoseconds.
func trailerTime(t *testing.T, resp *http.Response, name string) time.Time {
	t.Helper()
	ns, err := strconv.ParseInt(resp.Trailer.Get(name), 10, 64)
	if err != nil {
		t.Fatalf("trailer %s: %v (trailers %v)", name, err, resp.Trailer)
	}
	return time.Unix(0, ns)
}
