package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"sync"
	"time"

	"github.com/tokentap/tokentap/simstamp"
)

// maxLine bounds one line of a stream. The largest events of real APIs (a
// whole tool-call argument, a final usage block) are a few KiB.
const maxLine = 4 << 20

// readBufferSize is the client's read buffer: large enough that a burst of
// events is one read. The buffers are pooled: at hundreds of requests a
// second, a fresh one per request would make the client's own garbage
// collection a noise source in what it measures.
const readBufferSize = 16 << 10

var readBuffers = sync.Pool{New: func() any { b := make([]byte, readBufferSize); return &b }}

// utf8BOM may start a stream; the SSE specification has it skipped.
var utf8BOM = []byte("\xEF\xBB\xBF")

// do sends request seq and reads its stream to the end.
// body, if not nil, is the request's body, made ahead of time (bodies).
func do(ctx context.Context, cfg *Config, client *http.Client, seq int, body []byte) *Result {
	r := &Result{Seq: seq, Model: cfg.model(seq)}
	if seq < len(cfg.Schedule) {
		r.Group = cfg.Schedule[seq].Group
	}
	if body == nil {
		body = cfg.body(seq)
	}

	run := ctx
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(body))
	if err != nil {
		r.fail(ErrTransport, err.Error())
		return r
	}
	setHeaders(req.Header, cfg.API)
	for k, vs := range cfg.Header {
		k = textproto.CanonicalMIMEHeaderKey(k)
		if k == "Host" && len(vs) > 0 {
			// net/http sends req.Host, never a Host header.
			req.Host = vs[0]
			continue
		}
		req.Header[k] = vs
	}

	r.Start = time.Now()
	res, err := client.Do(req)
	if err != nil {
		r.End = time.Since(r.Start)
		r.failErr(run, err)
		return r
	}
	defer res.Body.Close()
	r.Status = res.StatusCode
	if res.StatusCode != http.StatusOK {
		detail, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorDetail))
		r.End = time.Since(r.Start)
		r.fail(errHTTPPrefix+strconv.Itoa(res.StatusCode), string(bytes.TrimSpace(detail)))
		return r
	}
	if cfg.counter != nil {
		r.keepText()
	}
	r.read(run, cfg.API, res.Body)
	if cfg.counter != nil {
		r.countText(cfg.counter)
	}
	return r
}

func (r *Result) fail(kind, detail string) {
	if r.ErrorKind == "" {
		r.ErrorKind, r.Error = kind, detail
	}
}

// failErr classifies a transport error by what ended the request: the
// run's end (run is the run's context), the request's own timeout, or the
// network.
func (r *Result) failErr(run context.Context, err error) {
	switch {
	case run.Err() != nil:
		r.fail(ErrCanceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		r.fail(ErrTimeout, err.Error())
	default:
		r.fail(ErrTransport, err.Error())
	}
}

// read parses the body as SSE line by line, framed as the specification
// frames it (the sse package's Decoder is the reference FuzzRead holds it
// to): lines end in LF, CRLF or a bare CR, a CRLF may be split between
// reads, and a BOM at the start is skipped. A blank line dispatches the
// event its data: and event: lines built; comments are skipped except the
// simulator's stamps, which date the events that follow them. A line is
// handled as soon as the read that ends it returns, with that read's time,
// so a stream ending its lines with a bare CR is timed as one ending them
// with LF.
func (r *Result) read(run context.Context, api API, body io.Reader) {
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	buf := *bp
	var (
		typ, data []byte
		hasData   bool
		long      []byte // the start of a line longer than buf
		stamp     time.Time
		stamped   bool
		done      bool
		first     = true // the next line is the stream's first
		skipLF    bool   // a CR ended the last read: an LF next is its CRLF's
		pending   int    // buf[:pending] is the start of a line not yet ended
		at        time.Time
	)
	dispatch := func() {
		if !hasData {
			typ = typ[:0]
			return
		}
		r.Events++
		if stamped {
			r.Delays = append(r.Delays, at.Sub(stamp))
		}
		switch readEvent(api, typ, data, r) {
		case eventContent:
			t := at.Sub(r.Start)
			if r.ContentEvents == 0 {
				r.FirstToken = t
			} else {
				r.Gaps = append(r.Gaps, t-r.LastToken)
			}
			r.LastToken = t
			r.ContentEvents++
		case eventDone:
			done = true
		case eventError:
			r.fail(ErrStream, r.StreamError)
		}
		typ, data, hasData = typ[:0], data[:0], false
	}
	// handle takes one line without its line end.
	handle := func(line []byte) {
		if first {
			line, first = bytes.TrimPrefix(line, utf8BOM), false
		}
		switch {
		case len(line) == 0:
			dispatch()
		case line[0] == ':':
			if sent, ok := simstamp.Parse(line); ok {
				stamp, stamped = sent, true
			}
		default:
			name, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(name) {
			case "data":
				if hasData {
					data = append(data, '\n')
				}
				data, hasData = append(data, value...), true
			case "event":
				typ = append(typ[:0], value...)
			}
		}
	}
	// whole is the line whose start is in long and whose end is seg.
	whole := func(seg []byte) []byte {
		if len(long) == 0 {
			return seg
		}
		line := append(long, seg...)
		long = line[:0]
		return line
	}
	for {
		n, err := body.Read(buf[pending:])
		if n > 0 {
			at = time.Now()
			p := buf[:pending+n]
			i := 0 // where the line being read starts in p
			if skipLF {
				skipLF = false
				if p[0] == '\n' {
					i = 1
				}
			}
			for i < len(p) {
				k := indexLineEnd(p[i:])
				if k < 0 {
					break
				}
				end := i + k
				if len(long)+k > maxLine {
					break
				}
				handle(whole(p[i:end]))
				i = end + 1
				if p[end] == '\r' {
					switch {
					case i == len(p):
						skipLF = true
					case p[i] == '\n':
						i++
					}
				}
			}
			// p[i:] is a line not yet ended: kept at buf's start, or
			// added to long once it fills buf.
			pending = copy(buf, p[i:])
			if pending == len(buf) {
				long = append(long, buf...)
				pending = 0
			}
			if len(long)+pending > maxLine {
				r.fail(ErrUnreadable, fmt.Sprintf("a line longer than %d bytes", maxLine))
				break
			}
		}
		if err != nil {
			if err != io.EOF {
				r.End = time.Since(r.Start)
				r.failErr(run, err)
				return
			}
			if len(long)+pending > 0 {
				handle(whole(buf[:pending]))
			}
			// An event left without its blank line at the end (llama.cpp's
			// last [DONE]) still counts.
			dispatch()
			break
		}
	}
	r.End = time.Since(r.Start)
	if !r.UsageReported {
		r.OutputTokens = r.ContentEvents
	}
	if !done {
		r.fail(ErrTruncated, "the stream ended without the API's end marker")
	}
}

// indexLineEnd is the index of the first CR or LF in p, or -1.
func indexLineEnd(p []byte) int {
	lf := bytes.IndexByte(p, '\n')
	if lf < 0 {
		return bytes.IndexByte(p, '\r')
	}
	if cr := bytes.IndexByte(p[:lf], '\r'); cr >= 0 {
		return cr
	}
	return lf
}
