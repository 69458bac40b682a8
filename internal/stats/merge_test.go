package stats

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// traffic is a deterministic mix of requests over a few keys: values spread
// over two decades, some failures, aborts and estimates, some metrics not
// observed.
func traffic(n int, seed uint64) (keys []Key, samples []Sample, times []time.Duration) {
	rnd := rand.New(rand.NewPCG(seed, 1))
	models := []Key{
		key("openai", "gpt-a"),
		key("openai", "gpt-b", "team", "search"),
		key("openai", "gpt-b", "team", "ads"),
		key("anthropic", "claude"),
	}
	for i := 0; i < n; i++ {
		var s Sample
		k := models[rnd.IntN(len(models))]
		base := 1 + float64(rnd.IntN(len(models)))
		for m := range NumMetrics {
			if rnd.IntN(10) > 0 {
				s.Set(Metric(m), base*(0.3+3*rnd.Float64()))
			}
		}
		switch rnd.IntN(20) {
		case 0:
			s.Error = true
		case 1:
			s.Abort = true
		case 2:
			s.Estimated = true
		case 3:
			s.SLOJudged = true
		case 4, 5:
			s.SLOJudged, s.SLOMet = true, true
		case 6:
			s.Buffered = true
		}
		s.Inflight = int64(rnd.IntN(100))
		keys, samples = append(keys, k), append(samples, s)
		times = append(times, time.Duration(rnd.IntN(50))*time.Second)
	}
	return keys, samples, times
}

// viaSnapshot exports an aggregate as JSON and reads it back, as the CLI
// does with each instance's /tokentap/stats/sketches.
func viaSnapshot(t *testing.T, a *Aggregate) *Aggregate {
	t.Helper()
	snap, err := a.Snapshot(origin)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	agg, err := back.Aggregate()
	if err != nil {
		t.Fatal(err)
	}
	return agg
}

// TestMergeEqualsUnion: traffic split over instances, their sketches merged
// through the snapshot JSON, gives exactly the report of one instance that
// saw all of it: the sketches merge bin by bin, so not even the sketch's
// accuracy is lost.
func TestMergeEqualsUnion(t *testing.T) {
	tests := []struct {
		name      string
		instances int
		maxRows   int
		split     func(i int, k Key) int
	}{
		{"round robin over two", 2, 0, func(i int, _ Key) int { return i % 2 }},
		{"by model: disjoint rows", 2, 0, func(_ int, k Key) int { return len(k.Model) % 2 }},
		{"all to one, none to the other", 2, 0, func(int, Key) int { return 0 }},
		{"three instances", 3, 0, func(i int, _ Key) int { return i % 3 }},
		{"overflow rows merge too", 2, 2, func(i int, _ Key) int { return i % 2 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, samples, times := traffic(1000, 7)
			union := newTestStore(tt.maxRows)
			parts := make([]*Store, tt.instances)
			for i := range parts {
				parts[i] = newTestStore(tt.maxRows)
			}
			if tt.maxRows > 0 {
				// Give every instance the same first keys, so that the
				// same keys overflow in each and in the union; the union
				// sees each instance's seed requests.
				for _, k := range []Key{key("openai", "gpt-a"), key("anthropic", "claude")} {
					for _, p := range parts {
						record(p, k, Sample{}, 0)
						record(union, k, Sample{}, 0)
					}
				}
			}
			for i := range keys {
				record(union, keys[i], samples[i], times[i])
				record(parts[tt.split(i, keys[i])], keys[i], samples[i], times[i])
			}
			for _, v := range []struct {
				w      Window
				series bool
			}{{Window1m, false}, {Window5m, false}, {Window1h, false}, {Window24h, false}, {Window1m, true}, {Window5m, true}, {Window24h, true}} {
				w := v.w
				view := (*Store).Aggregate
				if v.series {
					view = (*Store).Series
				}
				now := at(55 * time.Second)
				merged := viaSnapshot(t, view(parts[0], w, now))
				for _, p := range parts[1:] {
					if err := merged.Merge(viaSnapshot(t, view(p, w, now))); err != nil {
						t.Fatal(err)
					}
				}
				got, want := merged.Report(now), view(union, w, now).Report(now)
				// Health is each instance's own detector's, merged by the
				// worst state (TestMergeHealth), not the union's: leave it
				// out here.
				for _, rep := range []*Report{got, want} {
					for i := range rep.Rows {
						rep.Rows[i].Health = nil
					}
				}
				if v.series && (len(want.Rows) == 0 || len(want.Rows[0].Series) != windows[w].count) {
					t.Fatalf("%s: series of %d slices, want the window's %d", w, len(want.Rows[0].Series), windows[w].count)
				}
				if len(want.Rows) < 2 {
					t.Fatalf("%s: only %d rows: the case tests nothing", w, len(want.Rows))
				}
				if overflow := want.Rows[len(want.Rows)-1].Overflow; overflow != (tt.maxRows > 0) {
					t.Fatalf("%s: overflow row present %v, want %v", w, overflow, tt.maxRows > 0)
				}
				if !reflect.DeepEqual(got, want) {
					gj, _ := json.MarshalIndent(got, "", " ")
					wj, _ := json.MarshalIndent(want, "", " ")
					t.Errorf("%s: merged report differs from the union's\nmerged: %s\nunion: %s", w, gj, wj)
				}
			}
		})
	}
}

// TestMergeRejectsOtherWindow: a 1h state never merges into a 5m one.
func TestMergeRejectsOtherWindow(t *testing.T) {
	s := newTestStore(0)
	record(s, key("p", "m"), full(1), 0)
	a, b := s.Aggregate(Window5m, at(time.Second)), s.Aggregate(Window1h, at(time.Second))
	if err := a.Merge(b); err == nil {
		t.Fatal("merged a 1h aggregate into a 5m one")
	}
}

// TestMergeLeavesSourceAlone: merging copies the other aggregate's
// sketches, so a later merge into the result does not change the source.
func TestMergeLeavesSourceAlone(t *testing.T) {
	s := newTestStore(0)
	record(s, key("p", "m"), full(1), 0)
	src := s.Aggregate(Window5m, at(time.Second))
	before, _ := json.Marshal(src.Report(origin))
	dst := newAggregate(Window5m)
	_ = dst.Merge(src)
	_ = dst.Merge(src)
	after, _ := json.Marshal(src.Report(origin))
	if string(before) != string(after) {
		t.Errorf("source changed by merging:\n%s\n%s", before, after)
	}
	if r := dst.Rows()[0]; r.Counts.Requests != 2 || r.Count(Duration) != 2 {
		t.Errorf("double merge: %d requests, %d points", r.Counts.Requests, r.Count(Duration))
	}
}
