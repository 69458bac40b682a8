package exchange

import (
	"io"
	"sync"
)

// initialSize is the copy's first capacity when the body's length is not
// known (chunked uploads): most chat requests' parameters come early.
const initialSize = 512

// bodyTee is an io.ReadCloser that passes the body's bytes through unchanged
// and keeps a copy of up to its limit.
//
// The transport may read the body on its own goroutine while the response
// already arrives on the request's, hence the lock. It is per request, so
// no two requests ever contend on it.
type bodyTee struct {
	body io.ReadCloser

	mu        sync.Mutex
	buf       []byte
	limit     int
	truncated bool
	eof       bool
}

// newBodyTee wraps body, copying up to limit bytes. contentLength, when known
// (positive), sizes the copy once.
func newBodyTee(body io.ReadCloser, limit, contentLength int64) *bodyTee {
	size := min(int64(initialSize), limit)
	if contentLength > 0 {
		size = min(contentLength, limit)
	}
	return &bodyTee{body: body, limit: int(limit), buf: make([]byte, 0, max(size, 0))}
}

// Read reads from the body and copies what fits under the limit.
func (t *bodyTee) Read(p []byte) (int, error) {
	n, err := t.body.Read(p)
	if n > 0 || err == io.EOF {
		t.mu.Lock()
		room := t.limit - len(t.buf)
		if n > room {
			t.truncated = true
		}
		if k := min(n, room); k > 0 {
			t.buf = append(t.buf, p[:k]...)
		}
		if err == io.EOF {
			t.eof = true
		}
		t.mu.Unlock()
	}
	return n, err
}

// Close closes the body.
func (t *bodyTee) Close() error { return t.body.Close() }

// Snapshot returns the bytes copied so far. They are never rewritten (the
// tee only appends), so the caller may read them without the lock.
// truncated is true once a read went past the limit; complete once the
// whole body has passed or the limit was reached.
func (t *bodyTee) Snapshot() (body []byte, truncated, complete bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf[:len(t.buf):len(t.buf)], t.truncated, t.eof || t.truncated
}
