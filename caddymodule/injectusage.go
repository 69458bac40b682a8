package caddymodule

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"
	"go.uber.org/zap"
)

// inject_usage: OpenAI and most OpenAI-compatible servers report usage in a
// stream only when the client sets stream_options.include_usage. With the
// option on, tokentap sets it for clients that did not, so the counts are
// exact, and takes back out of the response exactly what the setting added:
// the usage-only chunk (choices: [], usage: {...}) and the "usage":null
// member that OpenAI then puts in every other chunk. To do that it must hold
// the request body until it has read it (capped) and hold back the partial
// event at the end of each write: the opt-in exception to "nothing
// buffered" that the option's name announces.

// injectUsage rewrites a streaming chat request that did not ask for usage
// so that it does. It returns the request to pass on and whether it changed
// it; the body it read is kept for the measurement.
func (x *exchange) injectUsage(r *http.Request) (*http.Request, bool) {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return r, false
	}
	limit := x.h.MaxRequestBody
	if r.ContentLength > limit {
		x.h.logger.Info("inject_usage: request body over max_request_body; passing it through untouched",
			zap.Int64("content_length", r.ContentLength), zap.Int64("max_request_body", limit))
		return r, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if int64(len(body)) > limit || err != nil {
		// Past the cap (or a read error, which the upstream will see too):
		// what was read goes first, the rest follows unread.
		if err == nil {
			x.h.logger.Info("inject_usage: request body over max_request_body; passing it through untouched",
				zap.Int64("max_request_body", limit))
		}
		r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		return r, false
	}
	_ = r.Body.Close()
	x.fullBody = body
	newBody, ok := withIncludeUsage(body)
	if !ok {
		r.Body = io.NopCloser(bytes.NewReader(body))
		return r, false
	}
	r.Body = io.NopCloser(bytes.NewReader(newBody))
	r.ContentLength = int64(len(newBody))
	if r.Header.Get("Content-Length") != "" {
		r.Header.Set("Content-Length", strconv.Itoa(len(newBody)))
	}
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(newBody)), nil }
	return r, true
}

// withIncludeUsage returns body with stream_options.include_usage set to
// true, editing only those bytes, when the body is a streaming request that
// does not ask for usage already.
func withIncludeUsage(body []byte) ([]byte, bool) {
	if !gjson.ValidBytes(body) {
		return nil, false
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() || !root.Get("stream").Bool() {
		return nil, false
	}
	opts := root.Get("stream_options")
	switch {
	case !opts.Exists() || opts.Type == gjson.Null:
		if opts.Exists() {
			// "stream_options": null becomes an object.
			return splice(body, opts.Index, len(opts.Raw), `{"include_usage":true}`), true
		}
		open := bytes.IndexByte(body, '{')
		return splice(body, open+1, 0, `"stream_options":{"include_usage":true},`), true
	case opts.IsObject():
		iu := gjson.GetBytes(body, "stream_options.include_usage")
		if iu.Type == gjson.True {
			return nil, false
		}
		if iu.Exists() && iu.Index > 0 {
			return splice(body, iu.Index, len(iu.Raw), "true"), true
		}
		open := opts.Index + bytes.IndexByte([]byte(opts.Raw), '{')
		insert := `"include_usage":true,`
		if len(opts.Map()) == 0 {
			insert = `"include_usage":true`
		}
		return splice(body, open+1, 0, insert), true
	}
	return nil, false
}

func splice(b []byte, at, remove int, insert string) []byte {
	out := make([]byte, 0, len(b)-remove+len(insert))
	out = append(out, b[:at]...)
	out = append(out, insert...)
	return append(out, b[at+remove:]...)
}

type readCloser struct {
	io.Reader
	io.Closer
}

// usageStripper sits between the upstream's bytes and the client's when
// usage was injected. It forwards each complete event as soon as it is
// complete, minus what the injection added, and feeds the meter the bytes
// as the upstream sent them.
type usageStripper struct {
	pending []byte
	out     []byte
	// passthrough is set when the stream does not look like the events we
	// can edit (no event boundary within the event size cap); from then on
	// everything passes untouched.
	passthrough bool
	max         int
}

// events splits off the complete events at the start of pending, returning
// the end of the last complete one.
func completeEvents(b []byte) int {
	end := 0
	for {
		i := bytes.Index(b[end:], []byte("\n\n"))
		j := bytes.Index(b[end:], []byte("\r\n\r\n"))
		switch {
		case i < 0 && j < 0:
			return end
		case j >= 0 && (i < 0 || j < i):
			end += j + 4
		default:
			end += i + 2
		}
	}
}

// forEvent calls f with each complete raw event in b[:end].
func forEvent(b []byte, f func(ev []byte)) {
	for len(b) > 0 {
		i := bytes.Index(b, []byte("\n\n"))
		j := bytes.Index(b, []byte("\r\n\r\n"))
		n := 0
		switch {
		case i < 0 && j < 0:
			n = len(b)
		case j >= 0 && (i < 0 || j < i):
			n = j + 4
		default:
			n = i + 2
		}
		f(b[:n])
		b = b[n:]
	}
}

// appendClientBytes appends what the client gets for one raw event: nothing
// for the injected usage-only chunk, the event without its "usage":null
// member otherwise, the event itself for anything it does not recognise.
func appendClientBytes(dst, ev []byte) []byte {
	data, off := singleDataLine(ev)
	if data == nil || data[0] != '{' {
		return append(dst, ev...)
	}
	s := view(data)
	usage := gjson.Get(s, "usage")
	if usage.IsObject() {
		if isEmptyArray(gjson.Get(s, "choices")) {
			return dst
		}
		return append(dst, ev...)
	}
	if usage.Type != gjson.Null || usage.Index == 0 {
		return append(dst, ev...)
	}
	start, end := memberSpan(data, usage.Index, usage.Index+len(usage.Raw))
	if start < 0 {
		return append(dst, ev...)
	}
	dst = append(dst, ev[:off+start]...)
	return append(dst, ev[off+end:]...)
}

func isEmptyArray(r gjson.Result) bool {
	if !r.IsArray() {
		return false
	}
	empty := true
	r.ForEach(func(_, _ gjson.Result) bool {
		empty = false
		return false
	})
	return empty
}

// view reads b as a string without copying, for gjson; nothing read from it
// outlives the event.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// singleDataLine returns the JSON of an event made of one `data:` line and
// its offset in ev; nil for anything else, which then passes untouched.
func singleDataLine(ev []byte) ([]byte, int) {
	line := bytes.TrimRight(ev, "\r\n")
	if bytes.ContainsAny(line, "\r\n") || !bytes.HasPrefix(line, []byte("data:")) {
		return nil, 0
	}
	off := len("data:")
	if len(line) > off && line[off] == ' ' {
		off++
	}
	if off >= len(line) {
		return nil, 0
	}
	return line[off:], off
}

// memberSpan finds the bytes of the object member whose value spans
// [valStart, valEnd) in data, with the comma that separates it from its
// neighbour, so removing them leaves valid JSON.
func memberSpan(data []byte, valStart, valEnd int) (int, int) {
	i := valStart - 1
	for i >= 0 && isSpace(data[i]) {
		i--
	}
	if i < 0 || data[i] != ':' {
		return -1, -1
	}
	i--
	for i >= 0 && isSpace(data[i]) {
		i--
	}
	if i < 0 || data[i] != '"' {
		return -1, -1
	}
	keyStart := bytes.LastIndexByte(data[:i], '"')
	if keyStart < 0 {
		return -1, -1
	}
	before := keyStart - 1
	for before >= 0 && isSpace(data[before]) {
		before--
	}
	if before >= 0 && data[before] == ',' {
		return before, valEnd
	}
	after := valEnd
	for after < len(data) && isSpace(data[after]) {
		after++
	}
	if after < len(data) && data[after] == ',' {
		return keyStart, after + 1
	}
	return keyStart, valEnd
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// writeStripped is responseWriter.Write when usage was injected.
func (w *responseWriter) writeStripped(p []byte, at time.Time) (int, error) {
	x, s := w.x, w.x.strip
	if s.passthrough {
		n, err := w.forward(p)
		if n > 0 {
			x.feed(p[:n], at)
		}
		return n, err
	}
	s.pending = append(s.pending, p...)
	end := completeEvents(s.pending)
	if end == 0 {
		if len(s.pending) > s.max {
			// No event boundary where one must be: this is not a stream
			// we can edit. Everything from here on passes untouched.
			s.passthrough = true
			x.meter.Observer().Degrade("inject_usage_passthrough")
			_, err := w.forward(s.pending)
			x.feed(s.pending, at)
			s.pending = s.pending[:0]
			return len(p), err
		}
		return len(p), nil
	}
	complete := s.pending[:end]
	s.out = s.out[:0]
	forEvent(complete, func(ev []byte) { s.out = appendClientBytes(s.out, ev) })
	var err error
	if len(s.out) > 0 {
		_, err = w.forward(s.out)
	}
	x.feed(complete, at)
	s.pending = s.pending[:copy(s.pending, s.pending[end:])]
	return len(p), err
}

// flushPending forwards, untouched, a partial event still held when the
// upstream's response ended (a truncated stream): no byte is ever lost.
func (w *responseWriter) flushPending() {
	s := w.x.strip
	if s == nil || len(s.pending) == 0 {
		return
	}
	_, _ = w.forward(s.pending)
	w.x.feed(s.pending, time.Now())
	s.pending = s.pending[:0]
}
