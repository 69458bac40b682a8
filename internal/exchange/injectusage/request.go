package injectusage

import (
	"bytes"
	"io"
	"net/http"
	"strconv"

	"github.com/tidwall/gjson"
)

// Result says what [Request] did with a request.
type Result uint8

const (
	// Skipped: not a POST with a body, so nothing was read.
	Skipped Result = iota
	// Injected: the body was read whole and now asks for usage.
	Injected
	// Unchanged: the body was read whole and needs no change (not a
	// streaming request, asks for usage already, or not a JSON object).
	Unchanged
	// TooLarge: the body is longer than the limit, so it goes on
	// untouched: what was read first, the rest unread.
	TooLarge
	// ReadFailed: reading the body failed; what was read goes on, and the
	// upstream meets the same error.
	ReadFailed
)

// Request reads r's body, up to limit bytes, and when it is a streaming
// request that does not ask for usage, replaces it with one that does,
// keeping Content-Length and GetBody true to the new body. It sets r's body
// to what the upstream must read in every case but Skipped, and returns r,
// the body it read when it read it whole (for the caller to measure: the
// upload is gone once read), and what it did.
//
// A body over the limit is not rewritten: rewriting needs all of it, and
// holding more than the limit is what the limit forbids.
func Request(r *http.Request, limit int64) (*http.Request, []byte, Result) {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return r, nil, Skipped
	}
	if r.ContentLength > limit {
		return r, nil, TooLarge
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if int64(len(body)) > limit || err != nil {
		// What was read goes first, the rest follows unread.
		r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		if err != nil {
			return r, nil, ReadFailed
		}
		return r, nil, TooLarge
	}
	_ = r.Body.Close()
	newBody, ok := Rewrite(body)
	if !ok {
		r.Body = io.NopCloser(bytes.NewReader(body))
		return r, body, Unchanged
	}
	r.Body = io.NopCloser(bytes.NewReader(newBody))
	r.ContentLength = int64(len(newBody))
	if r.Header.Get("Content-Length") != "" {
		r.Header.Set("Content-Length", strconv.Itoa(len(newBody)))
	}
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(newBody)), nil }
	return r, body, Injected
}

// Rewrite returns body with stream_options.include_usage set to true, and
// true, when body is a streaming request that does not ask for usage
// already; else nil and false. It edits only those bytes, so the rest of
// the request (key order, spacing, numbers, escapes) reaches the upstream
// as the client wrote it.
func Rewrite(body []byte) ([]byte, bool) {
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

// splice returns a new b with remove bytes at at replaced by insert; b
// itself is the body read for the measurement and must stay as it came.
func splice(b []byte, at, remove int, insert string) []byte {
	out := make([]byte, 0, len(b)-remove+len(insert))
	out = append(out, b[:at]...)
	out = append(out, insert...)
	return append(out, b[at+remove:]...)
}

// readCloser reads the part of a body already read, then the rest, and
// closes the original.
type readCloser struct {
	io.Reader
	io.Closer
}
