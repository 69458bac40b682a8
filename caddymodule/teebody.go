package caddymodule

import (
	"io"
	"sync"
)

// teeBody copies the first bytes of the request body as the upstream reads
// them, so the model and parameters can be read without holding back the
// upload. The copy is capped; the upload is not.
//
// The transport may read the body on its own goroutine while the response
// already arrives on the request's, hence the lock. It is per request, so no
// two requests ever contend on it.
type teeBody struct {
	body io.ReadCloser

	mu        sync.Mutex
	buf       []byte
	limit     int
	truncated bool
	eof       bool
}

func newTeeBody(body io.ReadCloser, limit, contentLength int64) *teeBody {
	size := int64(512)
	if contentLength > 0 {
		size = min(contentLength, limit)
	}
	return &teeBody{body: body, limit: int(limit), buf: make([]byte, 0, size)}
}

func (t *teeBody) Read(p []byte) (int, error) {
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

func (t *teeBody) Close() error { return t.body.Close() }

// snapshot returns the bytes copied so far. They are never rewritten (the
// tee only appends), so the caller may read them without the lock.
// complete is true once the whole body has passed or the cap was reached.
func (t *teeBody) snapshot() (body []byte, truncated, complete bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf[:len(t.buf):len(t.buf)], t.truncated, t.eof || t.truncated
}
