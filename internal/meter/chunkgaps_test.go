package meter

import (
	"testing"
	"time"
)

// TestChunkGapBuckets: each gap lands in the bucket whose bounds are the
// GenAI conventions' duration boundaries, upper bound included, with the
// zero gap in the first bucket and anything past 81.92 s in the last.
func TestChunkGapBuckets(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name   string
		gap    time.Duration
		bucket int
	}{
		{"zero", 0, 0},
		{"1ns", 1, 0},
		{"exactly 10ms", 10 * ms, 0},
		{"just above 10ms", 10*ms + 1, 1},
		{"exactly 20ms", 20 * ms, 1},
		{"just above 20ms", 20*ms + 1, 2},
		{"30ms", 30 * ms, 2},
		{"exactly 40ms", 40 * ms, 2},
		{"exactly 640ms", 640 * ms, 6},
		{"1s", time.Second, 7},
		{"exactly 81.92s", 81920 * ms, 13},
		{"just above 81.92s", 81920*ms + 1, 14},
		{"an hour", time.Hour, 14},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g ChunkGaps
			g.add(tt.gap)
			for i, c := range g.Count {
				want := uint32(0)
				if i == tt.bucket {
					want = 1
				}
				if c != want {
					t.Errorf("bucket %d count %d, want %d (gap %v)", i, c, want, tt.gap)
				}
			}
			if g.Sum[tt.bucket] != tt.gap {
				t.Errorf("bucket %d sum %v, want %v", tt.bucket, g.Sum[tt.bucket], tt.gap)
			}
			if tt.bucket < ChunkGapBuckets-1 {
				lo := time.Duration(0)
				if tt.bucket > 0 {
					lo = ChunkGapBound(tt.bucket - 1)
				}
				if tt.gap > ChunkGapBound(tt.bucket) || (tt.bucket > 0 && tt.gap <= lo) {
					t.Errorf("gap %v outside bucket %d's bounds (%v, %v]", tt.gap, tt.bucket, lo, ChunkGapBound(tt.bucket))
				}
			}
		})
	}
	if got := ChunkGapBound(ChunkGapBuckets - 2); got != 81920*ms {
		t.Errorf("last bound %v, want 81.92s", got)
	}
}

// TestChunkGapsOfAStream: a replayed stream counts one gap per chunk after
// the first, and the gaps add up to the time from the first chunk to the
// last, bucket by bucket.
func TestChunkGapsOfAStream(t *testing.T) {
	evs := events(testdata(t, "openai", "chat_usage.sse"))
	offsets := []time.Duration{100, 105, 115, 135, 175, 255, 415, 735, 1375, 2655, 2656, 2657, 2658}
	if len(offsets) != len(evs) {
		t.Fatalf("%d offsets for %d events", len(offsets), len(evs))
	}
	mt := New(openAIChat{}, Options{}, t0)
	mt.Response(200, "text/event-stream", "")
	for i, ev := range evs {
		mt.Write(ev, t0.Add(offsets[i]*time.Millisecond))
	}
	m := mt.Finish(t0.Add(2700*time.Millisecond), OutcomeUnknown, "")
	g := m.ChunkGaps
	if got := g.Total(); got != m.Chunks-1 || got != int64(len(evs)-1) {
		t.Fatalf("%d gaps for %d chunks", got, m.Chunks)
	}
	// Gaps: 5, 10, 20, 40, 80, 160, 320, 640, 1280, 1, 1, 1 ms.
	want := map[int]uint32{0: 5, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1}
	for i, c := range g.Count {
		if c != want[i] {
			t.Errorf("bucket %d (≤ %v): %d gaps, want %d", i, ChunkGapBound(i), c, want[i])
		}
	}
	var sum time.Duration
	for _, s := range g.Sum {
		sum += s
	}
	if span := (offsets[len(offsets)-1] - offsets[0]) * time.Millisecond; sum != span {
		t.Errorf("gaps add up to %v, want the first-to-last span %v", sum, span)
	}
}
