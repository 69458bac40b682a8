package meter

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// maxTapBacklog bounds the compressed bytes waiting for the decompressor. A
// decompressor that falls this far behind costs the measurement, not memory.
const maxTapBacklog = 1 << 20

// supportedEncoding reports whether a Content-Encoding can be measured.
func supportedEncoding(ce string) bool {
	switch ce {
	case "gzip", "x-gzip", "deflate", "br", "zstd":
		return true
	}
	return false
}

// tap measures a compressed body. The client gets the compressed bytes
// untouched; a side copy is decompressed here, incrementally, so the total
// work stays linear in the stream.
//
// The standard and well-kept decompressors (compress/gzip and flate,
// andybalholm/brotli, klauspost/compress/zstd) are pull readers whose
// errors are sticky: they cannot be fed a piece, told "no more yet", and
// resumed. So each compressed response gets one goroutine that pulls from a
// buffer the request's writes push into. The buffer is per request and
// bounded; writes never wait for the decompressor.
type tap struct {
	mu      sync.Mutex
	ready   sync.Cond
	buf     []byte // compressed bytes received
	off     int    // how far the decompressor has read buf
	marks   []mark // where each write ends in buf, and when it arrived
	at      time.Duration
	closed  bool
	stopped bool // the decompressor is gone; drop further writes
	done    chan struct{}
}

// mark is the end of one write in the tap's buffer and its arrival time,
// so decompressed output is timed by the compressed bytes it came from.
type mark struct {
	end int
	at  time.Duration
}

// startTap starts decompressing encoding; emit receives the decompressed
// bytes with the arrival time of the compressed bytes read so far. fault is
// called once if the stream cannot be decompressed, and recovered holds any
// panic of emit (the dialect's code runs on the tap's goroutine).
func startTap(encoding string, emit func(p []byte, at time.Duration), fault func(reason string), recovered func(any)) *tap {
	t := &tap{done: make(chan struct{})}
	t.ready.L = &t.mu
	go t.run(encoding, emit, fault, recovered)
	return t
}

func (t *tap) run(encoding string, emit func([]byte, time.Duration), fault func(string), recovered func(any)) {
	defer close(t.done)
	defer func() {
		t.mu.Lock()
		t.stopped = true
		t.buf, t.marks = nil, nil
		t.mu.Unlock()
	}()
	defer func() {
		if rec := recover(); rec != nil {
			recovered(rec)
		}
	}()
	r, closeReader, err := newDecompressor(encoding, t)
	if err != nil {
		if !t.wasClosedEmpty() {
			fault("decompress_error")
		}
		return
	}
	defer closeReader()
	out := make([]byte, 32<<10)
	for {
		n, err := r.Read(out)
		if n > 0 {
			emit(out[:n], t.arrival())
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			if !errors.Is(err, errTapOverflow) {
				fault("decompress_error")
			}
			return
		}
	}
}

var errTapOverflow = errors.New("decompression fell behind")

// newDecompressor picks the reader for a Content-Encoding. "deflate" is
// zlib-wrapped by the HTTP spec, but some servers send raw deflate; the
// first byte tells them apart.
func newDecompressor(encoding string, src io.Reader) (io.Reader, func(), error) {
	switch encoding {
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, nil, err
		}
		// Concatenated members are one stream, as net/http reads them.
		zr.Multistream(true)
		return zr, func() { _ = zr.Close() }, nil
	case "deflate":
		br := bufio.NewReader(src)
		first, err := br.Peek(1)
		if err != nil {
			return nil, nil, err
		}
		if first[0]&0x0f == 8 {
			zr, err := zlib.NewReader(br)
			if err != nil {
				return nil, nil, err
			}
			return zr, func() { _ = zr.Close() }, nil
		}
		fr := flate.NewReader(br)
		return fr, func() { _ = fr.Close() }, nil
	case "br":
		return brotli.NewReader(src), func() {}, nil
	case "zstd":
		zr, err := zstd.NewReader(src, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	}
	return nil, nil, errors.New("unsupported encoding " + encoding)
}

// write hands compressed bytes that arrived at time at to the tap. It never
// blocks and never keeps p.
func (t *tap) write(p []byte, at time.Duration) (overflow bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped || t.closed {
		return false
	}
	if len(t.buf)-t.off+len(p) > maxTapBacklog {
		t.closed = true
		t.buf = t.buf[:t.off]
		t.ready.Signal()
		return true
	}
	if t.off == len(t.buf) {
		t.buf, t.off, t.marks = t.buf[:0], 0, t.marks[:0]
	}
	t.buf = append(t.buf, p...)
	t.marks = append(t.marks, mark{len(t.buf), at})
	t.ready.Signal()
	return false
}

// Read gives the decompressor the compressed bytes received so far, waiting
// for more until the stream is closed: never more than the rest of one
// write, so that what the decompressor makes of them is timed by that
// write. The decompressors read ahead (into a bufio.Reader, brotli's own
// buffer), and a decompressor that fell behind would otherwise take in
// several writes at once and time the events of the first by the last.
func (t *tap) Read(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.off == len(t.buf) && !t.closed {
		t.ready.Wait()
	}
	if t.off == len(t.buf) {
		if t.buf == nil && t.marks == nil {
			return 0, errTapOverflow
		}
		return 0, io.EOF
	}
	end := len(t.buf)
	if len(t.marks) > 0 {
		end = t.marks[0].end
		t.at = t.marks[0].at
	}
	n := copy(p, t.buf[t.off:end])
	t.off += n
	if len(t.marks) > 0 && t.marks[0].end <= t.off {
		t.marks = t.marks[1:]
	}
	return n, nil
}

func (t *tap) arrival() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.at
}

func (t *tap) wasClosedEmpty() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed && len(t.buf) == 0
}

// close ends the compressed stream and waits for the decompressor to read
// what is left (at most maxTapBacklog bytes).
func (t *tap) close() {
	t.mu.Lock()
	t.closed = true
	t.ready.Signal()
	t.mu.Unlock()
	<-t.done
}

// normalizeEncoding returns the single coding of a Content-Encoding header,
// or "" when it is absent, identity, or a list of several.
func normalizeEncoding(ce string) (coding string, several bool) {
	ce = strings.ToLower(strings.TrimSpace(ce))
	if ce == "" || ce == "identity" {
		return "", false
	}
	if strings.Contains(ce, ",") {
		return ce, true
	}
	return ce, false
}
