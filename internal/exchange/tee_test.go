package exchange

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
)

// closeRecorder is a body that says whether it was closed.
type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestTee(t *testing.T) {
	const body = `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hello"}]}`
	for _, tc := range []struct {
		name          string
		body          string
		limit         int64
		contentLength int64
		// oneByte reads the body a byte at a time, as a slow upload does.
		oneByte       bool
		readTo        int // bytes the reader takes; -1 for all
		wantCopy      string
		wantTruncated bool
		wantComplete  bool
	}{
		{"whole body under the limit", body, 1 << 20, int64(len(body)), false, -1, body, false, true},
		{"chunked, unknown length", body, 1 << 20, -1, false, -1, body, false, true},
		{"a byte at a time", body, 1 << 20, -1, true, -1, body, false, true},
		{"exactly the limit", body, int64(len(body)), int64(len(body)), false, -1, body, false, true},
		{"over the limit: capped, truncated", body, 10, int64(len(body)), false, -1, body[:10], true, true},
		{"over the limit a byte at a time", body, 10, -1, true, -1, body[:10], true, true},
		{"upload not finished", body, 1 << 20, int64(len(body)), true, 20, body[:20], false, false},
		{"empty body", "", 1 << 20, 0, false, -1, "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r io.Reader = strings.NewReader(tc.body)
			if tc.oneByte {
				r = iotest.OneByteReader(r)
			}
			src := &closeRecorder{Reader: r}
			tee := newBodyTee(src, tc.limit, tc.contentLength)
			var passed []byte
			var err error
			if tc.readTo < 0 {
				passed, err = io.ReadAll(tee)
			} else {
				passed = make([]byte, tc.readTo)
				_, err = io.ReadFull(tee, passed)
			}
			if err != nil {
				t.Fatal(err)
			}
			// The upload itself is never capped or changed.
			if want := tc.body; tc.readTo >= 0 {
				want = tc.body[:tc.readTo]
				if string(passed) != want {
					t.Fatalf("passed %q, want %q", passed, want)
				}
			} else if string(passed) != want {
				t.Fatalf("passed %q, want %q", passed, want)
			}
			got, truncated, complete := tee.Snapshot()
			if string(got) != tc.wantCopy || truncated != tc.wantTruncated || complete != tc.wantComplete {
				t.Fatalf("Snapshot = %q, truncated %v, complete %v; want %q, %v, %v",
					got, truncated, complete, tc.wantCopy, tc.wantTruncated, tc.wantComplete)
			}
			if err := tee.Close(); err != nil || !src.closed {
				t.Fatalf("Close: err %v, body closed %v", err, src.closed)
			}
		})
	}
}

// TestTeeReadError passes the body's error through and leaves the copy
// incomplete: the measurement then reads only what passed.
func TestTeeReadError(t *testing.T) {
	boom := errors.New("connection reset")
	src := &closeRecorder{Reader: io.MultiReader(strings.NewReader(`{"model":"m"`), iotest.ErrReader(boom))}
	tee := newBodyTee(src, 1<<20, 100)
	_, err := io.ReadAll(tee)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	got, truncated, complete := tee.Snapshot()
	if string(got) != `{"model":"m"` || truncated || complete {
		t.Fatalf("Snapshot = %q, %v, %v", got, truncated, complete)
	}
}

// TestTeeSnapshotStable holds the promise Snapshot makes: bytes it
// returned are never rewritten by later reads, so they may be read
// without the lock while the upload goes on (run under -race).
func TestTeeSnapshotStable(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 1000)
	tee := newBodyTee(io.NopCloser(iotest.HalfReader(bytes.NewReader(body))), 4096, -1)
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(io.Discard, tee) })
	for range 200 {
		got, _, _ := tee.Snapshot()
		if !bytes.Equal(got, body[:len(got)]) {
			t.Fatal("a snapshot differs from the body's first bytes")
		}
		// Appending to a snapshot must not reach the tee's buffer.
		_ = append(got, 'x')
	}
	wg.Wait()
	got, truncated, complete := tee.Snapshot()
	if !bytes.Equal(got, body[:4096]) || !truncated || !complete {
		t.Fatalf("final Snapshot: %d bytes, truncated %v, complete %v", len(got), truncated, complete)
	}
}
