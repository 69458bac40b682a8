package stats

import (
	"strings"
	"testing"
	"time"
)

// TestInflightBuckets: levels fall in doubling buckets, the last open.
func TestInflightBuckets(t *testing.T) {
	tests := []struct {
		level  int64
		lo, hi int64
	}{
		{1, 1, 1}, {2, 2, 3}, {3, 2, 3}, {4, 4, 7}, {7, 4, 7}, {8, 8, 15}, {31, 16, 31}, {32, 32, 63}, {63, 32, 63}, {64, 64, 0}, {5000, 64, 0},
	}
	for _, tt := range tests {
		lo, hi := InflightRange(inflightBucket(tt.level))
		if lo != tt.lo || hi != tt.hi {
			t.Errorf("level %d: bucket [%d, %d], want [%d, %d]", tt.level, lo, hi, tt.lo, tt.hi)
		}
	}
}

// TestByInflight: a row's requests are split by in-flight level, each
// bucket with its own quantiles within InflightAccuracy; requests without
// a level are in the row but in no bucket; a half-window later the older
// half has left the view.
func TestByInflight(t *testing.T) {
	s := newTestStore(0)
	k := key("openai", "gpt-a")
	rec := func(level int64, tps, ttft float64, d time.Duration) {
		smp := only(OutputTokensPerSecond, tps)
		smp.Set(TimeToFirstToken, ttft)
		smp.Inflight = level
		record(s, k, smp, d)
	}
	// Alone, 100 tokens/s; at 2-3 in flight, 80; at 70, 20 and a slow
	// first token.
	for i := range 4 {
		rec(1, 100, 0.2, time.Duration(i)*time.Second)
	}
	rec(2, 80, 0.3, 5*time.Second)
	rec(3, 80, 0.3, 6*time.Second)
	rec(70, 20, 2, 7*time.Second)
	rec(0, 55, 0.5, 8*time.Second)

	now := at(9 * time.Second)
	rep := s.Aggregate(Window5m, now).Report(now)
	got := rep.Rows[0].ByInflight
	type bucket struct {
		lo, hi, requests int64
		tps, ttft        float64
	}
	want := []bucket{{1, 1, 4, 100, 0.2}, {2, 3, 2, 80, 0.3}, {64, 0, 1, 20, 2}}
	if len(got) != len(want) {
		t.Fatalf("%d buckets, want %d: %+v", len(got), len(want), got)
	}
	within := func(v, w float64) bool { return v >= w*(1-InflightAccuracy) && v <= w*(1+InflightAccuracy) }
	for i, w := range want {
		g := got[i]
		tps := g.Metrics.OutputTokensPerSecond.Quantiles["p50"]
		ttft := g.Metrics.TimeToFirstToken.Quantiles["p50"]
		if g.InflightMin != w.lo || g.InflightMax != w.hi || g.Requests != w.requests || !within(tps, w.tps) || !within(ttft, w.ttft) {
			t.Errorf("bucket %d: %+v (tps p50 %v, ttft p50 %v), want %+v", i, g, tps, ttft, w)
		}
	}
	if rep.Rows[0].Requests != 8 {
		t.Errorf("row requests %d, want 8 (the one without a level included)", rep.Rows[0].Requests)
	}

	// The 5m window's in-flight halves are 150 s: at 301 s the first half
	// (0-150 s) has left, with every request.
	later := at(301 * time.Second)
	rec(1, 50, 0.1, 300*time.Second)
	rep = s.Aggregate(Window5m, later).Report(later)
	if b := rep.Rows[0].ByInflight; len(b) != 1 || b[0].Requests != 1 {
		t.Errorf("after a half-window: %+v, want only the new request", b)
	}
}

// TestSnapshotInflightErrors: a snapshot's in-flight buckets are checked.
func TestSnapshotInflightErrors(t *testing.T) {
	doc := func(inflight string) string {
		return `{"version":1,"window":"5m","rows":[{"provider":"p","model":"m","requests":1,"by_inflight":[` + inflight + `]}]}`
	}
	tests := []struct{ name, doc, want string }{
		{"not a bucket", doc(`{"inflight_min":3,"requests":1}`), "in-flight bucket 3: not a bucket's lowest level"},
		{"a bucket twice", doc(`{"inflight_min":2,"requests":1},{"inflight_min":2,"requests":1}`), "given twice"},
		{"negative count", doc(`{"inflight_min":4,"requests":-1}`), "in-flight bucket 4: negative count"},
		{"a 1 % sketch", doc(`{"inflight_min":1,"requests":1,"sketches":{"output_tokens_per_second":"` + sketchOf(t, RelativeAccuracy, 50) + `"}}`), "relative accuracy 0.01, want 0.04"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := ParseSnapshot([]byte(tt.doc))
			if err == nil {
				_, err = snap.Aggregate()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
