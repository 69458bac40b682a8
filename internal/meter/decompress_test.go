package meter

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
	"go.uber.org/goleak"

	"github.com/tokentap/tokentap/sse"
)

// compressor writes a Content-Encoding; flush marks the end of an event so
// its bytes can be decoded before the next event is written, as a server
// streaming compressed SSE must do.
type compressor struct {
	name string
	new  func(w io.Writer) (io.Writer, func() error, func() error) // writer, flush, close
}

var compressors = []compressor{
	{"gzip", func(w io.Writer) (io.Writer, func() error, func() error) {
		z := gzip.NewWriter(w)
		return z, z.Flush, z.Close
	}},
	{"deflate", func(w io.Writer) (io.Writer, func() error, func() error) { // zlib-wrapped, per RFC 9110
		z := zlib.NewWriter(w)
		return z, z.Flush, z.Close
	}},
	{"deflate-raw", func(w io.Writer) (io.Writer, func() error, func() error) { // what some servers send instead
		z, _ := flate.NewWriter(w, flate.DefaultCompression)
		return z, z.Flush, z.Close
	}},
	{"br", func(w io.Writer) (io.Writer, func() error, func() error) {
		z := brotli.NewWriter(w)
		return z, z.Flush, z.Close
	}},
	{"zstd", func(w io.Writer) (io.Writer, func() error, func() error) {
		z, _ := zstd.NewWriter(w)
		return z, z.Flush, z.Close
	}},
}

func (c compressor) encoding() string {
	if c.name == "deflate-raw" {
		return "deflate"
	}
	return c.name
}

// compressEvents compresses each event with a flush after it and returns the
// compressed piece of every event.
func compressEvents(c compressor, evs [][]byte) [][]byte {
	var out bytes.Buffer
	w, flush, closer := c.new(&out)
	var pieces [][]byte
	for _, ev := range evs {
		_, _ = w.Write(ev)
		_ = flush()
		pieces = append(pieces, bytes.Clone(out.Bytes()))
		out.Reset()
	}
	_ = closer()
	pieces[len(pieces)-1] = append(pieces[len(pieces)-1], out.Bytes()...)
	return pieces
}

// TestCompressedStreams: a compressed stream is measured as its plain self,
// event times included, for every supported Content-Encoding, flushed after
// every event as Go's and nginx's gzip writers do. "paced" lets the
// decompressor catch up after each write, as the network's pace would;
// "burst" writes the whole stream before the decompressor has read any of
// it, as a decompressor that fell behind sees it: each event must still
// carry the arrival time of the compressed write that completed it, not of
// the last write read.
func TestCompressedStreams(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, fixture := range []string{"chat_usage.sse", "deepseek_reasoning.sse", "openrouter_midstream_error.sse"} {
		evs := events(testdata(t, "openai", fixture))
		plain := replay(t, fixture, 200, "text/event-stream")
		for _, c := range compressors {
			for _, paced := range []bool{true, false} {
				name := fixture + "/" + c.name + "/burst"
				if paced {
					name = fixture + "/" + c.name + "/paced"
				}
				t.Run(name, func(t *testing.T) {
					checkCompressedStream(t, c, evs, plain, paced)
				})
			}
		}
	}
}

// checkCompressedStream writes evs compressed by c, one write per event,
// and compares the measurement with plain's.
func checkCompressedStream(t *testing.T, c compressor, evs [][]byte, plain *Measurement, paced bool) {
	t.Helper()
	mt := New(openAIChat{}, Options{}, t0)
	mt.Request("/v1/chat/completions", []byte(`{"model":"m","stream":true}`), false)
	mt.Response(200, "text/event-stream", c.encoding())
	for i, p := range compressEvents(c, evs) {
		mt.Write(p, t0.Add(at(i)))
		if paced {
			waitTapIdle(mt)
		}
	}
	m := mt.Finish(t0.Add(at(len(evs))), OutcomeUnknown, "")
	got, want := *m, *plain
	got.Bytes, want.Bytes = 0, 0
	if !reflect.DeepEqual(got, want) {
		t.Errorf("compressed measurement differs:\n got %+v\nwant %+v", got, want)
	}
}

// waitTapIdle waits until the tap has read everything written so far.
func waitTapIdle(mt *Meter) {
	for i := 0; i < 1000; i++ {
		mt.tap.mu.Lock()
		idle := mt.tap.off == len(mt.tap.buf)
		mt.tap.mu.Unlock()
		if idle {
			time.Sleep(time.Millisecond) // and has emitted what it read
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCompressedSplits: compressed bytes cut anywhere give the same counts.
func TestCompressedSplits(t *testing.T) {
	defer goleak.VerifyNone(t)
	body := testdata(t, "openai", "chat_tool_calls.sse")
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, c := range compressors {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			w, _, closer := c.new(&buf)
			_, _ = w.Write(body)
			_ = closer()
			z := buf.Bytes()
			var want *Measurement
			for round := 0; round < 20; round++ {
				mt := New(openAIChat{}, Options{}, t0)
				mt.Response(200, "text/event-stream", c.encoding())
				for i := 0; i < len(z); {
					n := 1 + rnd.IntN(64)
					mt.Write(z[i:min(i+n, len(z))], t0.Add(step))
					i += n
				}
				m := mt.Finish(t0.Add(step), OutcomeUnknown, "")
				if m.Usage.OutputTokens != 30 || m.Outcome != OutcomeCompleted || m.Degraded != 0 {
					t.Fatalf("round %d: %+v", round, m)
				}
				if want == nil {
					want = m
				} else if !reflect.DeepEqual(m.FinishReasons, want.FinishReasons) || m.Chunks != want.Chunks {
					t.Fatalf("round %d differs", round)
				}
			}
		})
	}
}

func TestCompressionFaults(t *testing.T) {
	defer goleak.VerifyNone(t)
	tests := []struct {
		name, encoding string
		body           []byte
		reason         string
	}{
		{"corrupt gzip", "gzip", []byte("\x1f\x8b\x08\x00garbage that is not deflate"), "decompress_error"},
		{"not gzip at all", "gzip", []byte("data: {}\n\n"), "decompress_error"},
		{"corrupt zstd", "zstd", []byte{0x28, 0xb5, 0x2f, 0xfd, 0xff, 0xff, 0xff}, "decompress_error"},
		{"unsupported encoding", "compress", []byte{1, 2, 3}, "content_encoding"},
		{"two encodings", "gzip, br", []byte{1, 2, 3}, "content_encoding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := New(openAIChat{}, Options{}, t0)
			mt.Response(200, "text/event-stream", tt.encoding)
			mt.Write(tt.body, t0.Add(step))
			m := mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
			if m.DegradedReason != tt.reason || m.Bytes != int64(len(tt.body)) {
				t.Errorf("reason %q bytes %d, want %q %d", m.DegradedReason, m.Bytes, tt.reason, len(tt.body))
			}
		})
	}
	t.Run("aborted mid-stream: the decompressor goroutine ends", func(t *testing.T) {
		pieces := compressEvents(compressors[0], events(testdata(t, "openai", "chat_usage.sse")))
		mt := New(openAIChat{}, Options{}, t0)
		mt.Response(200, "text/event-stream", "gzip")
		mt.Write(pieces[0], t0.Add(step))
		mt.Write(pieces[1][:3], t0.Add(step))
		m := mt.Finish(t0.Add(2*step), OutcomeClientAbort, "")
		if m.Outcome != OutcomeClientAbort {
			t.Errorf("outcome %v", m.Outcome)
		}
	})
	t.Run("a panicking dialect on the tap goroutine is reported, not fatal", func(t *testing.T) {
		var got any
		var buf bytes.Buffer
		z := gzip.NewWriter(&buf)
		_, _ = z.Write(testdata(t, "openai", "chat_usage.sse"))
		_ = z.Close()
		mt := New(panickyDialect{}, Options{OnPanic: func(rec any) { got = rec }}, t0)
		mt.Response(200, "text/event-stream", "gzip")
		mt.Write(buf.Bytes(), t0.Add(step))
		m := mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
		if got != "boom" || m.DegradedReason != "internal_panic" || m.Outcome != OutcomeUnknown {
			t.Errorf("recovered %v reason %q outcome %v", got, m.DegradedReason, m.Outcome)
		}
	})
}

type panickyDialect struct{ openAIChat }

func (panickyDialect) Event(*Observer, *sse.Event) { panic("boom") }

// FuzzDecompressingTap: any bytes, compressed and cut anywhere, measure like
// the plain bytes; any bytes claimed to be gzip never panic or hang.
func FuzzDecompressingTap(f *testing.F) {
	for _, name := range []string{"chat_usage.sse", "chat_n2.sse", "llamacpp_done_unterminated.sse"} {
		b := testdata(f, "openai", name)
		f.Add(b, uint16(len(b)/2), uint8(0))
		f.Add(b, uint16(7), uint8(4))
	}
	f.Fuzz(func(t *testing.T, data []byte, cut uint16, which uint8) {
		c := compressors[int(which)%len(compressors)]
		var buf bytes.Buffer
		w, _, closer := c.new(&buf)
		_, _ = w.Write(data)
		_ = closer()
		z := buf.Bytes()
		k := int(cut) % (len(z) + 1)
		plain := New(openAIChat{}, Options{MaxEventSize: 4096}, t0)
		plain.Response(200, "text/event-stream", "")
		plain.Write(data, t0.Add(step))
		want := *plain.Finish(t0.Add(step), OutcomeUnknown, "")
		mt := New(openAIChat{}, Options{MaxEventSize: 4096}, t0)
		mt.Response(200, "text/event-stream", c.encoding())
		mt.Write(z[:k], t0.Add(step))
		mt.Write(z[k:], t0.Add(step))
		got := *mt.Finish(t0.Add(step), OutcomeUnknown, "")
		got.Bytes, want.Bytes = 0, 0
		if len(data) > 0 && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s cut %d:\n got %+v\nwant %+v", c.name, k, got, want)
		}
		raw := New(openAIChat{}, Options{}, t0)
		raw.Response(200, "text/event-stream", "gzip")
		raw.Write(data, t0.Add(step))
		raw.Finish(t0.Add(step), OutcomeUnknown, "")
	})
}
