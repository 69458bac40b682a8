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

	"github.com/tokentap/tokentap/internal/simulator/stamp"
	"github.com/tokentap/tokentap/sse"
)

// maxEvent bounds one event of a stream. The largest events of real APIs
// (a whole tool-call argument, a final usage block) are a few KiB.
const maxEvent = 4 << 20

// readBufferSize is the client's read buffer: large enough that a burst of
// events is one read. The buffers are pooled: at hundreds of requests a
// second, a fresh one per request would make the client's own garbage
// collection a noise source in what it measures.
const readBufferSize = 16 << 10

var readers = sync.Pool{New: func() any { return &reader{buf: make([]byte, readBufferSize)} }}

// reader is a stream's read buffer and decoder, pooled together so that a
// request reuses both.
type reader struct {
	buf []byte
	dec sse.Decoder
}

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

// read parses the body as SSE with the sse package's Decoder, the one
// framing in the house: lines end in LF, CRLF or a bare CR, a CRLF may be
// split between reads, a BOM at the start is skipped, and an event left
// without its blank line at the end (llama.cpp's last [DONE]) still
// counts. Comments are skipped except the simulator's stamps, which date
// the events that follow them. Every event a read completes is handled
// before the next read, with that read's time, so a stream ending its
// lines with a bare CR is timed as one ending them with LF.
func (r *Result) read(run context.Context, api API, body io.Reader) {
	rd := readers.Get().(*reader)
	defer readers.Put(rd)
	var (
		sentAt  time.Time
		stamped bool
		done    bool
		at      time.Time
	)
	d := &rd.dec
	d.Reset()
	d.MaxEventSize = maxEvent
	d.OnComment = func(line []byte) {
		if sent, ok := stamp.Parse(line); ok {
			sentAt, stamped = sent, true
		}
	}
	d.OnEvent = func(e *sse.Event) {
		r.Events++
		if stamped {
			r.Delays = append(r.Delays, at.Sub(sentAt))
		}
		switch readEvent(api, e.Type, e.Data, r) {
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
	}
	defer func() { d.OnEvent, d.OnComment = nil, nil }()
	for {
		n, err := body.Read(rd.buf)
		if n > 0 {
			at = time.Now()
			d.Write(rd.buf[:n])
			if d.Stats().Oversized > 0 {
				r.fail(ErrUnreadable, fmt.Sprintf("an event longer than %d bytes", maxEvent))
				break
			}
		}
		if err != nil {
			if err != io.EOF {
				r.End = time.Since(r.Start)
				r.failErr(run, err)
				return
			}
			d.Close()
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
