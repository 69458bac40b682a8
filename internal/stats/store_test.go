package stats

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestWindowsSlide records requests at known offsets and views each window
// as time goes on: a request counts in a window until its slice leaves the
// window's ring.
func TestWindowsSlide(t *testing.T) {
	type view struct {
		window Window
		want   int64
	}
	// Steps in time order: a step records one request at its time, then
	// checks the views.
	steps := []struct {
		name   string
		t      time.Duration
		record bool
		views  []view
	}{
		{"request at 5s", 5 * time.Second, true, []view{{Window1m, 1}, {Window5m, 1}, {Window1h, 1}}},
		{"request at 25s", 25 * time.Second, true, []view{{Window1m, 2}, {Window5m, 2}, {Window1h, 2}}},
		// 1m is 6 slices of 10 s: at 59 s the oldest kept is [0, 10).
		{"59s still has 5s", 59 * time.Second, false, []view{{Window1m, 2}}},
		{"60s drops the slice [0,10)", 60 * time.Second, false, []view{{Window1m, 1}, {Window5m, 2}}},
		{"request at 65s", 65 * time.Second, true, []view{{Window1m, 2}, {Window5m, 3}, {Window1h, 3}}},
		{"request at 200s", 200 * time.Second, true, []view{{Window1m, 1}, {Window5m, 4}, {Window1h, 4}}},
		// 5m is 10 slices of 30 s: at 310 s the oldest kept is [30, 60).
		{"310s drops 5s and 25s from 5m", 310 * time.Second, false, []view{{Window1m, 0}, {Window5m, 2}, {Window1h, 4}}},
		{"request at 1000s", 1000 * time.Second, true, []view{{Window1m, 1}, {Window5m, 1}, {Window1h, 5}}},
		{"1075s: 1m is empty", 1075 * time.Second, false, []view{{Window1m, 0}, {Window5m, 1}}},
		// 1h is 12 slices of 5 min: at 3599 s the oldest kept is [0, 300).
		{"3599s: the hour has all", 3599 * time.Second, false, []view{{Window1h, 5}, {Window5m, 0}}},
		{"3600s drops [0,300)", 3600 * time.Second, false, []view{{Window1h, 1}}},
		{"4499s keeps [900,1200)", 4499 * time.Second, false, []view{{Window1h, 1}}},
		{"4500s: the hour is empty", 4500 * time.Second, false, []view{{Window1h, 0}}},
	}
	s := newTestStore(0)
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.record {
				record(s, key("openai", "m"), full(1), st.t)
			}
			for _, v := range st.views {
				r := rowOf(s.Aggregate(v.window, at(st.t)), "openai", "m")
				var got int64
				if r != nil {
					got = r.Counts.Requests
					if c := r.Count(Duration); c != got {
						t.Errorf("%s: duration points %d, requests %d: sketches and counts slide together", v.window, c, got)
					}
				}
				if got != v.want {
					t.Errorf("%s: requests = %d, want %d", v.window, got, v.want)
				}
			}
		})
	}
}

// TestSlotReuse: a ring's slot that turns over for a newer slice forgets
// the older one, and a request that arrives after its slot turned over is
// not added to the newer slice.
func TestSlotReuse(t *testing.T) {
	tests := []struct {
		name    string
		records []time.Duration // in recording order
		now     time.Duration
		want    int64
	}{
		{"slot of 5s reused at 65s", []time.Duration{5 * time.Second, 65 * time.Second}, 65 * time.Second, 1},
		{"late request for a turned slot is dropped", []time.Duration{65 * time.Second, 5 * time.Second}, 65 * time.Second, 1},
		{"slightly late request still counts", []time.Duration{65 * time.Second, 59 * time.Second}, 65 * time.Second, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(0)
			for _, d := range tt.records {
				record(s, key("p", "m"), full(2), d)
			}
			r := mustRow(t, s.Aggregate(Window1m, at(tt.now)), "p", "m")
			if r.Counts.Requests != tt.want || r.Count(TimeToFirstToken) != tt.want {
				t.Errorf("requests %d, ttft points %d; want %d", r.Counts.Requests, r.Count(TimeToFirstToken), tt.want)
			}
		})
	}
}

// TestOnlyObservedValues: a metric a request did not observe gets no point,
// while the request still counts.
func TestOnlyObservedValues(t *testing.T) {
	s := newTestStore(0)
	k := key("p", "m")
	record(s, k, only(Duration, 1.5), time.Second)
	record(s, k, only(Duration, 2.5), time.Second)
	smp := only(TimeToFirstToken, 0.25)
	smp.Error = true
	record(s, k, smp, time.Second)

	r := mustRow(t, s.Aggregate(Window1m, at(2*time.Second)), "p", "m")
	counts := map[Metric]int64{TimeToFirstToken: 1, Duration: 2, OutputTokensPerSecond: 0, InputTokens: 0}
	for m, want := range counts {
		if got := r.Count(m); got != want {
			t.Errorf("%s: %d points, want %d", m, got, want)
		}
	}
	if _, ok := r.Quantile(OutputTokensPerSecond, 0.5); ok {
		t.Error("a quantile of a metric without points")
	}
	if r.Counts != (Counts{Requests: 3, Errors: 1}) {
		t.Errorf("counts %+v", r.Counts)
	}
}

// TestQuantilesWithinAccuracy: a reported quantile is within
// RelativeAccuracy of the value at rank q*(n-1) whenever each time slice
// holds values within the spread MaxBins covers, however wide the spread
// of the whole window; past that within one slice, the tail that matters
// (high latencies, low throughput) stays exact and the other end collapses.
func TestQuantilesWithinAccuracy(t *testing.T) {
	all := []float64{0.05, 0.5, 0.9, 0.95, 0.99}
	tests := []struct {
		name   string
		metric Metric
		lo, hi float64
		// slices spreads the values over that many of the hour's 5 min
		// slices, in ascending bands.
		slices int
		exact  []float64
	}{
		{"ttft 20ms to 2s in one slice", TimeToFirstToken, 0.02, 2, 1, all},
		{"tokens/s 10 to 1000 in one slice", OutputTokensPerSecond, 10, 1000, 1, all},
		{"ttft 20ms to 40s over 12 slices", TimeToFirstToken, 0.02, 40, 12, all},
		{"input tokens 10 to 100000 over 12 slices", InputTokens, 10, 100000, 12, all},
		{"ttft 20ms to 40s in one slice keeps the high tail", TimeToFirstToken, 0.02, 40, 1, []float64{0.5, 0.9, 0.95, 0.99}},
		{"tokens/s 1 to 2000 in one slice keeps the slow tail", OutputTokensPerSecond, 1, 2000, 1, []float64{0.05, 0.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(0)
			const n = 1200
			values := make([]float64, 0, n)
			for i := 0; i < n; i++ {
				// Log-uniform from lo to hi, recorded in a scrambled
				// order within each slice's band.
				band := i * tt.slices / n
				j := band*(n/tt.slices) + (i*7919)%(n/tt.slices)
				v := tt.lo * math.Pow(tt.hi/tt.lo, float64(j)/(n-1))
				values = append(values, v)
				record(s, key("p", "m"), only(tt.metric, v), time.Duration(band)*5*time.Minute)
			}
			sortFloats(values)
			r := mustRow(t, s.Aggregate(Window1h, at(59*time.Minute)), "p", "m")
			if r.Count(tt.metric) != n {
				t.Fatalf("%d points, want %d", r.Count(tt.metric), n)
			}
			for _, q := range tt.exact {
				want := values[int(q*(n-1))]
				got, ok := r.Quantile(tt.metric, q)
				if !ok || math.Abs(got-want)/want > RelativeAccuracy+1e-9 {
					t.Errorf("p%g = %v, want %v within %g", q*100, got, want, RelativeAccuracy)
				}
			}
		})
	}
}

func sortFloats(v []float64) {
	for i := 1; i < len(v); i++ {
		for j := i; j > 0 && v[j] < v[j-1]; j-- {
			v[j], v[j-1] = v[j-1], v[j]
		}
	}
}

// TestOverflowRow: keys past MaxRows share the overflow row, and every
// request is still counted once.
func TestOverflowRow(t *testing.T) {
	tests := []struct {
		name         string
		maxRows      int
		keys         int
		wantRows     int
		wantOverflow int64
	}{
		{"under the cap", 4, 3, 3, 0},
		{"at the cap", 4, 4, 4, 0},
		{"past the cap", 4, 10, 4, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(tt.maxRows)
			for i := 0; i < tt.keys; i++ {
				record(s, key("p", "m", "team", string(rune('a'+i))), full(1), time.Second)
			}
			// The first keys keep their rows when they come back.
			record(s, key("p", "m", "team", "a"), full(1), 2*time.Second)
			a := s.Aggregate(Window1m, at(3*time.Second))
			var rows int
			var overflow, total int64
			for _, r := range a.Rows() {
				total += r.Counts.Requests
				if r.Overflow {
					overflow = r.Counts.Requests
					if r.Key.Provider != OverflowValue || r.Key.Model != OverflowValue || len(r.Key.Labels) != 0 {
						t.Errorf("overflow row key %+v", r.Key)
					}
					continue
				}
				rows++
			}
			if rows != tt.wantRows || overflow != tt.wantOverflow || total != int64(tt.keys)+1 {
				t.Errorf("%d rows, overflow %d, total %d; want %d, %d, %d", rows, overflow, total, tt.wantRows, tt.wantOverflow, tt.keys+1)
			}
			if s.Rows() != tt.wantRows {
				t.Errorf("Rows() = %d", s.Rows())
			}
			if r := a.Rows(); r[len(r)-1].Overflow != (tt.wantOverflow > 0) {
				t.Error("the overflow row is not last")
			}
		})
	}
}

// TestIdleRowReused: a row without a request for the longest window makes
// room for a new key instead of sending it to the overflow row.
func TestIdleRowReused(t *testing.T) {
	tests := []struct {
		name         string
		later        time.Duration
		wantOverflow bool
	}{
		{"within the hour: overflow", 30 * time.Minute, true},
		{"an hour and a slice later: reused", 65 * time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(2)
			record(s, key("p", "a"), full(1), 0)
			record(s, key("p", "b"), full(1), 0)
			record(s, key("p", "c"), full(3), tt.later)
			a := s.Aggregate(Window1m, at(tt.later))
			c := rowOf(a, "p", "c")
			if tt.wantOverflow {
				if c != nil || rowOf(a, OverflowValue, OverflowValue) == nil {
					t.Fatal("c has a row of its own while the table is full")
				}
				return
			}
			if c == nil || c.Counts.Requests != 1 || s.Rows() != 2 {
				t.Fatalf("c: %+v, %d rows", c, s.Rows())
			}
			// The reused row starts empty: nothing of a or b in any window.
			h := s.Aggregate(Window1h, at(tt.later))
			if got := mustRow(t, h, "p", "c").Counts.Requests; got != 1 {
				t.Errorf("reused row's hour holds %d requests", got)
			}
			if v, _ := mustRow(t, h, "p", "c").Quantile(Duration, 0.5); math.Abs(v-3)/3 > RelativeAccuracy {
				t.Errorf("reused row's duration p50 = %v, want 3", v)
			}
		})
	}
}

// TestKeys: labels in any order name the same row, long strings are cut at
// MaxKeyString on a UTF-8 boundary, and labels past MaxLabels are dropped.
func TestKeys(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes
	tests := []struct {
		name     string
		keys     []Key
		wantRows int
	}{
		{"label order does not matter", []Key{key("p", "m", "a", "1", "b", "2"), key("p", "m", "b", "2", "a", "1")}, 1},
		{"label values differ", []Key{key("p", "m", "a", "1"), key("p", "m", "a", "2")}, 2},
		{"no labels differs from a label", []Key{key("p", "m"), key("p", "m", "a", "1")}, 2},
		{"long models sharing a prefix share a row", []Key{key("p", long+"x"), key("p", long+"y")}, 1},
		{"provider and model do not run together", []Key{key("ab", "c"), key("a", "bc")}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(0)
			for _, k := range tt.keys {
				record(s, k, full(1), 0)
			}
			rows := s.Aggregate(Window1m, at(time.Second)).Rows()
			if len(rows) != tt.wantRows {
				t.Fatalf("%d rows, want %d", len(rows), tt.wantRows)
			}
			for _, r := range rows {
				if len(r.Key.Model) > MaxKeyString || !utf8Valid(r.Key.Model) {
					t.Errorf("stored model of %d bytes, valid UTF-8 %v", len(r.Key.Model), utf8Valid(r.Key.Model))
				}
			}
		})
	}
	t.Run("labels past MaxLabels are dropped", func(t *testing.T) {
		s := newTestStore(0)
		var labels []string
		for i := 0; i < MaxLabels+3; i++ {
			labels = append(labels, "l"+string(rune('a'+i)), "v")
		}
		record(s, key("p", "m", labels...), full(1), 0)
		if r := s.Aggregate(Window1m, at(time.Second)).Rows()[0]; len(r.Key.Labels) != MaxLabels {
			t.Errorf("%d labels kept, want %d", len(r.Key.Labels), MaxLabels)
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// TestInvalidValues: values no sketch can hold are dropped and counted,
// and the request's other metrics are kept.
func TestInvalidValues(t *testing.T) {
	tests := []struct {
		name    string
		value   float64
		dropped bool
	}{
		{"NaN", math.NaN(), true},
		{"negative", -1, true},
		{"infinite", math.Inf(1), true},
		{"beyond 1e12", 2e12, true},
		{"below 1e-9", 1e-12, true},
		{"zero is kept exactly", 0, false},
		{"ordinary", 0.3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(0)
			smp := only(TimeToFirstToken, tt.value)
			smp.Set(Duration, 1)
			record(s, key("p", "m"), smp, 0)
			r := mustRow(t, s.Aggregate(Window1m, at(time.Second)), "p", "m")
			wantPoints, wantInvalid := int64(1), int64(0)
			if tt.dropped {
				wantPoints, wantInvalid = 0, 1
			}
			if r.Count(TimeToFirstToken) != wantPoints || s.Invalid() != wantInvalid || r.Count(Duration) != 1 {
				t.Errorf("ttft points %d, invalid %d, duration points %d", r.Count(TimeToFirstToken), s.Invalid(), r.Count(Duration))
			}
			if !tt.dropped {
				if v, _ := r.Quantile(TimeToFirstToken, 0.5); math.Abs(v-tt.value) > tt.value*RelativeAccuracy {
					t.Errorf("p50 %v, want %v", v, tt.value)
				}
			}
		})
	}
}
