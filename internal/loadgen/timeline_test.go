package loadgen

import (
	"math"
	"testing"
	"time"
)

// ending is a completed request that started at start (from t0) and ended
// after dur, its first token at ttft and 11 tokens 10 ms apart.
func ending(t0 time.Time, start, dur, ttft time.Duration) *Result {
	r := result("m", ttft, 10*time.Millisecond, 11)
	r.Start, r.End = t0.Add(start), dur
	return r
}

func TestTimeline(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type want struct {
		width     time.Duration
		intervals int
		// requests, failed and TTFT p50 of some intervals, by index.
		at map[int][3]float64
	}
	for _, tc := range []struct {
		name    string
		results []*Result
		start   time.Time // the report's start
		want    want
	}{
		{
			name: "short run: 100 ms intervals by the end of each request",
			results: []*Result{
				ending(t0, 0, 50*time.Millisecond, 10*time.Millisecond),
				ending(t0, 0, 90*time.Millisecond, 30*time.Millisecond),
				ending(t0, 0, 250*time.Millisecond, 200*time.Millisecond),
				{Model: "m", Start: t0.Add(200 * time.Millisecond), End: 60 * time.Millisecond, ErrorKind: ErrTimeout},
			},
			start: t0,
			want: want{width: 100 * time.Millisecond, intervals: 3, at: map[int][3]float64{
				0: {2, 0, 0.010}, // the lower median of 10 and 30 ms
				1: {0, 0, 0},     // nothing finished: present, empty
				2: {2, 1, 0.200},
			}},
		},
		{
			name: "a request ending past 64 intervals doubles the width until it fits",
			results: []*Result{
				ending(t0, 0, 50*time.Millisecond, 10*time.Millisecond),
				ending(t0, 0, 150*time.Millisecond, 20*time.Millisecond),
				ending(t0, 0, 20*time.Second, 40*time.Millisecond), // 64 × 0.1 s doubled twice is 25.6 s
			},
			start: t0,
			want: want{width: 400 * time.Millisecond, intervals: 51, at: map[int][3]float64{
				0:  {2, 0, 0.010},
				1:  {0, 0, 0},
				50: {1, 0, 0.040},
			}},
		},
		{
			name: "warm-up: times from the report's start, which is earlier than the first finished request's",
			results: []*Result{
				ending(t0, 2*time.Second, 50*time.Millisecond, 10*time.Millisecond),
			},
			start: t0.Add(time.Second),
			want:  want{width: 100 * time.Millisecond, intervals: 1, at: map[int][3]float64{0: {1, 0, 0.010}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agg := newAggregator(&Config{Models: []string{"m"}})
			for _, r := range tc.results {
				agg.add(r)
			}
			rep := agg.report(tc.start, tc.start.Add(time.Minute), 0)
			tl := rep.Models[0].Timeline
			if tl == nil {
				t.Fatal("no timeline")
			}
			if tl.IntervalSeconds != tc.want.width.Seconds() || len(tl.Intervals) != tc.want.intervals {
				t.Fatalf("%d intervals of %v s, want %d of %v s", len(tl.Intervals), tl.IntervalSeconds, tc.want.intervals, tc.want.width.Seconds())
			}
			shift := tc.results[0].Start.Sub(tc.start).Seconds()
			total := 0
			for i, iv := range tl.Intervals {
				if ws := shift + float64(i)*tl.IntervalSeconds; math.Abs(iv.StartSeconds-ws) > 1e-9 || math.Abs(iv.EndSeconds-iv.StartSeconds-tl.IntervalSeconds) > 1e-9 {
					t.Errorf("interval %d: %v to %v s, want from %v, %v s wide", i, iv.StartSeconds, iv.EndSeconds, ws, tl.IntervalSeconds)
				}
				total += iv.Requests
				w, ok := tc.want.at[i]
				if !ok {
					continue
				}
				if iv.Requests != int(w[0]) || iv.Failed != int(w[1]) {
					t.Errorf("interval %d: %d requests, %d failed; want %v, %v", i, iv.Requests, iv.Failed, w[0], w[1])
				}
				if got := iv.TimeToFirstToken.P50; math.Abs(got-w[2]) > relativeAccuracy*w[2] {
					t.Errorf("interval %d: TTFT p50 %v, want %v", i, got, w[2])
				}
			}
			if total != len(tc.results) || rep.Total.Timeline == nil {
				t.Errorf("the intervals hold %d requests, want %d; total's timeline %v", total, len(tc.results), rep.Total.Timeline)
			}
		})
	}
}

// TestTimelineBounded runs an hour of requests, ten a second, through a
// timeline: it never holds more than maxIntervals intervals, and merging
// loses no request and keeps each interval's figures its requests'.
func TestTimelineBounded(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tl := newTimeline()
	const n = 36000
	peak := 0
	for i := range n {
		// TTFT rises with time: 10 ms, plus 1 ms per minute.
		at := time.Duration(i) * 100 * time.Millisecond
		tl.add(ending(t0, at, 50*time.Millisecond, 10*time.Millisecond+at/60000))
		peak = max(peak, len(tl.intervals))
	}
	if peak > maxIntervals {
		t.Errorf("%d intervals held at the peak, want at most %d", peak, maxIntervals)
	}
	rep := tl.report(t0)
	// 3600 s fits 64 intervals of 0.1 s × 2^k first at k = 10, and
	// takes 36 of those 102.4 s.
	if len(rep.Intervals) != 36 {
		t.Errorf("%d intervals for an hour, want 36", len(rep.Intervals))
	}
	if want := 102.4; math.Abs(rep.IntervalSeconds-want) > 1e-9 {
		t.Errorf("interval %v s, want %v", rep.IntervalSeconds, want)
	}
	sum := 0
	for _, iv := range rep.Intervals {
		sum += iv.Requests
		if iv.Requests == 0 {
			continue
		}
		// The median request of the interval finished mid-way: its TTFT
		// is 10 ms plus 1 ms per minute to then.
		mid := (iv.StartSeconds + iv.EndSeconds) / 2
		want := 0.010 + mid/60*0.001
		if iv.EndSeconds > 3600 {
			mid = (iv.StartSeconds + 3600) / 2 // the last interval is cut by the run's end
			want = 0.010 + mid/60*0.001
		}
		if math.Abs(iv.TimeToFirstToken.P50-want) > 0.02*want {
			t.Errorf("interval at %v s: TTFT p50 %v, want %v", iv.StartSeconds, iv.TimeToFirstToken.P50, want)
		}
	}
	if sum != n {
		t.Errorf("the intervals hold %d requests, want %d", sum, n)
	}
}
