package loadgen

import (
	"bufio"
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

var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBufferSize) }}

// timedReader notes when each read returned data. A line handed out by a
// bufio.Reader on top of it completed in the latest read: the buffer reads
// again only when it holds no complete line.
type timedReader struct {
	r  io.Reader
	at time.Time
}

func (t *timedReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.at = time.Now()
	}
	return n, err
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

// read parses the body as SSE line by line: a blank line dispatches the
// event its data: and event: lines built; comments are skipped except the
// simulator's stamps, which date the events that follow them. Lines end in
// LF or CRLF, as every LLM API sends them.
func (r *Result) read(run context.Context, api API, body io.Reader) {
	tr := &timedReader{r: body}
	br := readers.Get().(*bufio.Reader)
	br.Reset(tr)
	defer func() {
		br.Reset(nil)
		readers.Put(br)
	}()
	var (
		typ, data []byte
		hasData   bool
		long      []byte // a line longer than the read buffer, being joined
		stamp     time.Time
		stamped   bool
		done      bool
	)
	dispatch := func(at time.Time) {
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
	for {
		line, err := br.ReadSlice('\n')
		if len(long)+len(line) > maxLine {
			r.fail(ErrUnreadable, fmt.Sprintf("a line longer than %d bytes", maxLine))
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if long != nil {
			line = append(long, line...)
			long = nil
		}
		at := tr.at
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		switch {
		case len(line) == 0 && err == nil:
			dispatch(at)
		case len(line) > 0 && line[0] == ':':
			if sent, ok := simstamp.Parse(line); ok {
				stamp, stamped = sent, true
			}
		case len(line) > 0:
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
		if err != nil {
			if err != io.EOF {
				r.End = time.Since(r.Start)
				r.failErr(run, err)
				return
			}
			// An event left without its blank line at the end (llama.cpp's
			// last [DONE]) still counts.
			dispatch(at)
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
