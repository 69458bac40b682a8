package exchange

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestWriterHotFieldsFirst keeps what every Write and flush reads in the
// writer's first 64 bytes, one cache line when the line starts with it:
// a field added among them, or one of them grown, moves a read to a
// second line, which a cold stream pays for per event.
func TestWriterHotFieldsFirst(t *testing.T) {
	var w responseWriter
	for _, f := range []struct {
		name      string
		off, size uintptr
	}{
		{"ResponseWriter", unsafe.Offsetof(w.ResponseWriter), unsafe.Sizeof(w.ResponseWriter)},
		{"x", unsafe.Offsetof(w.x), unsafe.Sizeof(w.x)},
		{"strip", unsafe.Offsetof(w.strip), unsafe.Sizeof(w.strip)},
		{"held", unsafe.Offsetof(w.held), unsafe.Sizeof(w.held)},
		{"nHeld", unsafe.Offsetof(w.nHeld), unsafe.Sizeof(w.nHeld)},
		{"wroteHeader", unsafe.Offsetof(w.wroteHeader), unsafe.Sizeof(w.wroteHeader)},
	} {
		if end := f.off + f.size; end > 64 {
			t.Errorf("%s ends at byte %d of the writer, want within the first 64", f.name, end)
		}
	}
}

// TestWriterHeldAllocs: a response's held buffer comes from heldPool and
// goes back at its end, so a stream of small events, read in batches and
// released, allocates nothing in the writer once the meter is warm.
func TestWriterHeldAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates, and drops a share of sync.Pool's items on purpose")
	}
	ww, x := benchWriter(t)
	defer x.finish(0, "")
	ev := sseEvent(0)
	_, _ = ww.Write(ev)
	_ = ww.FlushError()
	ww.measureHeld()
	ww.release()
	allocs := testing.AllocsPerRun(100, func() {
		for range maxHeldWrites + 2 {
			_, _ = ww.Write(ev)
			_ = ww.FlushError()
		}
		ww.measureHeld()
		ww.release()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per response, want 0", allocs)
	}
	if ww.held != nil || ww.heldBuf != nil || ww.nHeld != 0 {
		t.Errorf("after release the writer still holds %d bytes (%d writes)", len(ww.held), ww.nHeld)
	}
}

// sseEvent is one chat chunk of n bytes or more, as one write.
func sseEvent(n int) []byte {
	ev := `data: {"choices":[{"index":0,"delta":{"content":"x"}}]}` + "\n\n"
	if pad := n - len(ev); pad > 0 {
		ev = `: ` + strings.Repeat("p", pad) + "\n" + ev
	}
	return []byte(ev)
}

// TestWriterBatches: the writer holds what it forwarded and the meter reads
// it in batches after the flush that completes one (maxHeldWrites writes or
// heldBatchBytes), before a write that does not fit, or at once for a write
// larger than maxHeldBytes; each event keeps the time of its own write, and
// the client gets every byte as written, at once.
func TestWriterBatches(t *testing.T) {
	small, long, huge := sseEvent(0), sseEvent(900), sseEvent(maxHeldBytes+1)
	tests := []struct {
		name   string
		writes [][]byte
		flush  bool  // flush after each write
		want   []int // events the meter has read after each write (and flush)
	}{
		{"a batch of small events, read after the flush of the last",
			repeat(small, maxHeldWrites+2), true, []int{0, 0, 0, 0, 0, 0, 0, 8, 8, 8}},
		{"long events end a batch by size",
			repeat(long, 5), true, []int{0, 0, 3, 3, 3}},
		{"without flushes, held writes are read before one that does not fit",
			repeat(long, 6), false, []int{0, 0, 0, 0, 4, 4}},
		{"a write larger than the bound is read at once, after those held",
			[][]byte{small, small, huge, small}, true, []int{0, 0, 3, 3}},
		{"no flush, more writes than a batch",
			repeat(small, maxHeldWrites+1), false, []int{0, 0, 0, 0, 0, 0, 0, 0, 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ww, x := benchWriter(t)
			client := ww.ResponseWriter.(*discardWriter)
			var sent, got bytes.Buffer
			client.write = func(p []byte) { got.Write(p) }
			var written []time.Time
			for i, p := range tt.writes {
				before := time.Now()
				if _, err := ww.Write(p); err != nil {
					t.Fatal(err)
				}
				written = append(written, before)
				sent.Write(p)
				if !bytes.Equal(got.Bytes(), sent.Bytes()) {
					t.Fatalf("write %d: the client has %d bytes, want the %d written", i, got.Len(), sent.Len())
				}
				if tt.flush {
					if err := ww.FlushError(); err != nil {
						t.Fatal(err)
					}
				}
				if n := x.m.M.Chunks; n != int64(tt.want[i]) {
					t.Fatalf("after write %d the meter has read %d events, want %d", i, n, tt.want[i])
				}
				time.Sleep(2 * time.Millisecond)
			}
			ww.measureHeld()
			m := &x.m.M
			if m.Chunks != int64(len(tt.writes)) {
				t.Errorf("at the end the meter read %d events, want %d", m.Chunks, len(tt.writes))
			}
			// The first event's time is its write's, not the batch's.
			first := m.Start.Add(m.FirstChunk)
			if first.Before(written[0]) || !first.Before(written[1]) {
				t.Errorf("first chunk at %v, written between %v and %v", first, written[0], written[1])
			}
			x.finish(0, "")
		})
	}
}

func repeat(p []byte, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = p
	}
	return out
}
