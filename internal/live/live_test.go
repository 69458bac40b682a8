package live

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"
)

// counts collects t's counts at now, sorted by key.
func counts(t *Table, now time.Time) []Count {
	var cs []Count
	t.Counts(now, func(c Count) { cs = append(cs, c) })
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Provider != cs[j].Provider {
			return cs[i].Provider < cs[j].Provider
		}
		return cs[i].Model < cs[j].Model
	})
	return cs
}

func TestCounts(t *testing.T) {
	a, b := Key{"openai", "gpt-4o"}, Key{"anthropic", "claude"}
	t0 := time.Now()
	tests := []struct {
		name string
		// run joins, writes and leaves streams on tb, then says when to
		// count.
		run  func(tb *Table, s []Stream) time.Time
		want []Count
	}{
		{
			name: "nothing joined",
			run:  func(*Table, []Stream) time.Time { return t0 },
		},
		{
			name: "waiting before the first byte",
			run: func(tb *Table, s []Stream) time.Time {
				tb.Join(&s[0], a, time.Second)
				return t0.Add(time.Hour)
			},
			want: []Count{{Key: a, InFlight: 1, Waiting: 1}},
		},
		{
			name: "receiving within the threshold, stalled past it",
			run: func(tb *Table, s []Stream) time.Time {
				tb.Join(&s[0], a, time.Second)
				tb.Join(&s[1], a, time.Second)
				s[0].Wrote(t0)
				s[1].Wrote(t0.Add(1500 * time.Millisecond))
				return t0.Add(2 * time.Second)
			},
			want: []Count{{Key: a, InFlight: 2, Receiving: 1, Stalled: 1}},
		},
		{
			name: "each stream's own threshold",
			run: func(tb *Table, s []Stream) time.Time {
				tb.Join(&s[0], a, time.Second)
				tb.Join(&s[1], a, 10*time.Second)
				s[0].Wrote(t0)
				s[1].Wrote(t0)
				return t0.Add(2 * time.Second)
			},
			want: []Count{{Key: a, InFlight: 2, Receiving: 1, Stalled: 1}},
		},
		{
			name: "no threshold never stalls",
			run: func(tb *Table, s []Stream) time.Time {
				tb.Join(&s[0], a, 0)
				s[0].Wrote(t0)
				return t0.Add(time.Hour)
			},
			want: []Count{{Key: a, InFlight: 1, Receiving: 1}},
		},
		{
			name: "a later write ends a stall",
			run: func(tb *Table, s []Stream) time.Time {
				tb.Join(&s[0], a, time.Second)
				s[0].Wrote(t0)
				s[0].Wrote(t0.Add(5 * time.Second))
				return t0.Add(5500 * time.Millisecond)
			},
			want: []Count{{Key: a, InFlight: 1, Receiving: 1}},
		},
		{
			name: "keys apart",
			run: func(tb *Table, s []Stream) time.Time {
				tb.Join(&s[0], a, time.Second)
				tb.Join(&s[1], b, time.Second)
				s[1].Wrote(t0)
				return t0
			},
			want: []Count{{Key: b, InFlight: 1, Receiving: 1}, {Key: a, InFlight: 1, Waiting: 1}},
		},
		{
			name: "left streams count no more, and the key reports zeros",
			run: func(tb *Table, s []Stream) time.Time {
				tb.Join(&s[0], a, time.Second)
				tb.Join(&s[1], a, time.Second)
				tb.Join(&s[2], a, time.Second)
				s[1].Leave()
				s[1].Leave() // twice is harmless
				s[0].Leave()
				s[2].Leave()
				return time.Now()
			},
			want: []Count{{Key: a}},
		},
		{
			name: "an empty key goes after Linger",
			run: func(tb *Table, s []Stream) time.Time {
				tb.Join(&s[0], a, time.Second)
				s[0].Leave()
				return time.Now().Add(Linger + time.Second)
			},
		},
		{
			name: "a stream may join again after leaving",
			run: func(tb *Table, s []Stream) time.Time {
				tb.Join(&s[0], a, time.Second)
				s[0].Wrote(t0)
				s[0].Leave()
				tb.Join(&s[0], b, time.Second)
				return t0
			},
			want: []Count{{Key: b, InFlight: 1, Waiting: 1}, {Key: a}},
		},
		{
			name: "never joined: Leave is harmless",
			run: func(_ *Table, s []Stream) time.Time {
				s[0].Leave()
				return t0
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tb Table
			s := make([]Stream, 3)
			now := tc.run(&tb, s)
			got := counts(&tb, now)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("counts:\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestOverflow: past MaxKeys, new keys share the overflow set, and the keys
// already there keep their own.
func TestOverflow(t *testing.T) {
	var tb Table
	streams := make([]Stream, MaxKeys+10)
	for i := range streams {
		tb.Join(&streams[i], Key{"p", fmt.Sprint("model-", i)}, time.Second)
	}
	var keys int
	var other Count
	tb.Counts(time.Now(), func(c Count) {
		keys++
		if c.Model == OverflowValue {
			other = c
		}
	})
	if keys != MaxKeys+1 {
		t.Errorf("keys reported = %d, want %d", keys, MaxKeys+1)
	}
	if other.Provider != OverflowValue || other.InFlight != 10 {
		t.Errorf("overflow = %+v, want 10 streams under %s", other, OverflowValue)
	}
	var again Stream
	tb.Join(&again, Key{"p", "model-0"}, time.Second)
	var model0 int64
	tb.Counts(time.Now(), func(c Count) {
		if c.Model == "model-0" {
			model0 = c.InFlight
		}
	})
	if model0 != 2 {
		t.Errorf("model-0 in flight = %d, want 2 (a known key keeps its set past the cap)", model0)
	}
}

// TestConcurrent joins, writes and leaves from many goroutines while
// another counts; with -race it checks the sharing, and at the end every
// stream has left.
func TestConcurrent(t *testing.T) {
	var tb Table
	keys := []Key{{"p", "a"}, {"p", "b"}, {"q", "a"}}
	stop := make(chan struct{})
	counted := make(chan struct{})
	go func() {
		defer close(counted)
		for {
			select {
			case <-stop:
				return
			default:
			}
			tb.Counts(time.Now(), func(c Count) {
				if c.Waiting+c.Receiving+c.Stalled != c.InFlight || c.InFlight < 0 {
					t.Errorf("inconsistent count %+v", c)
				}
			})
		}
	}()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var s Stream
			for i := range 500 {
				tb.Join(&s, keys[(g+i)%len(keys)], time.Millisecond)
				for range 3 {
					s.Wrote(time.Now())
				}
				s.Leave()
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-counted
	for _, c := range counts(&tb, time.Now()) {
		if c.InFlight != 0 {
			t.Errorf("%v still has %d in flight after every stream left", c.Key, c.InFlight)
		}
	}
}
