package probe

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func nopSend(context.Context, *Target) error { return nil }

// fakeSender records when each probe started, relative to the bubble's
// start, and takes the given time, or until its context ends, to finish.
type fakeSender struct {
	start time.Time
	takes func(n int) time.Duration
	fail  func(n int) error

	mu       sync.Mutex
	starts   []time.Duration
	inflight int
	maxIn    int
}

func (f *fakeSender) send(ctx context.Context, _ *Target) error {
	f.mu.Lock()
	n := len(f.starts)
	f.starts = append(f.starts, time.Since(f.start))
	f.inflight++
	f.maxIn = max(f.maxIn, f.inflight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inflight--
		f.mu.Unlock()
	}()
	select {
	case <-time.After(f.takes(n)):
	case <-ctx.Done():
		return ctx.Err()
	}
	if f.fail != nil {
		return f.fail(n)
	}
	return nil
}

func (f *fakeSender) startsSeen() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.starts)
}

func seconds(s ...float64) []time.Duration {
	out := make([]time.Duration, len(s))
	for i, v := range s {
		out[i] = time.Duration(v * float64(time.Second))
	}
	return out
}

func TestSchedule(t *testing.T) {
	tests := []struct {
		name     string
		interval time.Duration
		timeout  time.Duration
		offset   time.Duration
		takes    time.Duration
		runFor   time.Duration
		starts   []time.Duration
		want     CountsSnapshot
	}{
		{
			name:     "one per interval from the offset",
			interval: 10 * time.Second, offset: 3 * time.Second, takes: time.Second, runFor: 45 * time.Second,
			starts: seconds(3, 13, 23, 33, 43),
			want:   CountsSnapshot{Sent: 5},
		},
		{
			name:     "a slow probe makes the ticks it covers be skipped, not queued",
			interval: 10 * time.Second, takes: 25 * time.Second, runFor: 61 * time.Second,
			starts: seconds(0, 30, 60),
			want:   CountsSnapshot{Sent: 3, Skipped: 4},
		},
		{
			name:     "a probe that ends on the next tick does not skip it",
			interval: 10 * time.Second, takes: 10 * time.Second, runFor: 25 * time.Second,
			starts: seconds(0, 10, 20),
			want:   CountsSnapshot{Sent: 3},
		},
		{
			name:     "the timeout ends a stuck probe, as a failure",
			interval: 10 * time.Second, timeout: 4 * time.Second, offset: time.Second, takes: time.Hour, runFor: 24 * time.Second,
			starts: seconds(1, 11, 21),
			want:   CountsSnapshot{Sent: 3, Failed: 2},
		},
		{
			name:     "the shortest interval",
			interval: MinInterval, takes: 100 * time.Millisecond, runFor: 3500 * time.Millisecond,
			starts: seconds(0, 1, 2, 3),
			want:   CountsSnapshot{Sent: 4},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeSender{start: time.Now(), takes: func(int) time.Duration { return tt.takes }}
				tgt := validTarget()
				tgt.Name = t.Name()
				tgt.Interval, tgt.Timeout = tt.interval, tt.timeout
				p, err := New([]Target{tgt}, Options{
					Send:   f.send,
					Offset: func(time.Duration) time.Duration { return tt.offset },
				})
				if err != nil {
					t.Fatal(err)
				}
				p.Start()
				time.Sleep(tt.runFor)
				synctest.Wait()
				got, _ := p.Counts(tgt.Name)
				p.Stop()
				if starts := f.startsSeen(); !slices.Equal(starts, tt.starts) {
					t.Errorf("probes started at %v, want %v", starts, tt.starts)
				}
				if got != tt.want {
					t.Errorf("counts %+v, want %+v", got, tt.want)
				}
				if f.maxIn != 1 {
					t.Errorf("%d probes of one target in flight at once, want 1", f.maxIn)
				}
			})
		})
	}
}

func TestRandomOffsetWithinInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSender{start: time.Now(), takes: func(int) time.Duration { return 0 }}
		var targets []Target
		for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
			tgt := validTarget()
			tgt.Name, tgt.Interval = t.Name()+name, time.Minute
			targets = append(targets, tgt)
		}
		p, err := New(targets, Options{Send: f.send})
		if err != nil {
			t.Fatal(err)
		}
		p.Start()
		time.Sleep(time.Minute - time.Nanosecond)
		synctest.Wait()
		p.Stop()
		starts := f.startsSeen()
		if len(starts) != len(targets) {
			t.Fatalf("%d probes in the first interval, want one per target (%d)", len(starts), len(targets))
		}
		slices.Sort(starts)
		if starts[0] == starts[len(starts)-1] {
			t.Errorf("all %d targets probed at the same offset %v", len(targets), starts[0])
		}
	})
}

func TestStopCancelsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeSender{start: time.Now(), takes: func(int) time.Duration { return time.Hour }}
		tgt := validTarget()
		tgt.Name, tgt.Timeout = t.Name(), MaxTimeout
		p, err := New([]Target{tgt}, Options{Send: f.send, Offset: func(time.Duration) time.Duration { return 0 }})
		if err != nil {
			t.Fatal(err)
		}
		var changes int
		p.opts.OnChange = func(*Target, error) { changes++ }
		p.Start()
		time.Sleep(time.Second)
		synctest.Wait()
		if f.inflight != 1 {
			t.Fatalf("%d probes in flight, want 1", f.inflight)
		}
		stopped := time.Now()
		p.Stop()
		if d := time.Since(stopped); d != 0 {
			t.Errorf("Stop took %v with a probe in flight", d)
		}
		if f.inflight != 0 {
			t.Errorf("%d probes still in flight after Stop", f.inflight)
		}
		got, _ := p.Counts(tgt.Name)
		if want := (CountsSnapshot{Sent: 1, Canceled: 1}); got != want {
			t.Errorf("counts %+v, want %+v", got, want)
		}
		if changes != 0 {
			t.Errorf("a canceled probe was reported as a state change")
		}
		p.Start() // after Stop: must start nothing
		time.Sleep(time.Hour)
		if n := len(f.startsSeen()); n != 1 {
			t.Errorf("%d probes after a Start that followed Stop, want still 1", n)
		}
	})
}

func TestStateChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Probes 0-1 complete, 2-4 fail, 5 completes, 6 fails.
		fails := map[int]bool{2: true, 3: true, 4: true, 6: true}
		f := &fakeSender{
			start: time.Now(),
			takes: func(int) time.Duration { return time.Millisecond },
			fail: func(n int) error {
				if fails[n] {
					return errors.New("http_503: overloaded")
				}
				return nil
			},
		}
		tgt := validTarget()
		tgt.Name, tgt.Interval = t.Name(), time.Second
		var got []string
		p, err := New([]Target{tgt}, Options{
			Send:   f.send,
			Offset: func(time.Duration) time.Duration { return 0 },
			OnChange: func(_ *Target, err error) {
				if err != nil {
					got = append(got, "failing: "+err.Error())
				} else {
					got = append(got, "ok")
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		p.Start()
		time.Sleep(6500 * time.Millisecond)
		synctest.Wait()
		p.Stop()
		want := []string{"ok", "failing: http_503: overloaded", "ok", "failing: http_503: overloaded"}
		if !slices.Equal(got, want) {
			t.Errorf("state changes %q, want %q", got, want)
		}
		c, _ := p.Counts(tgt.Name)
		if c.Sent != 7 || c.Failed != 4 {
			t.Errorf("counts %+v, want 7 sent, 4 failed", c)
		}
	})
}

func TestSenderPanicIsAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tgt := validTarget()
		tgt.Name = t.Name()
		var failure error
		p, err := New([]Target{tgt}, Options{
			Send:     func(context.Context, *Target) error { panic("sender bug") },
			Offset:   func(time.Duration) time.Duration { return 0 },
			OnChange: func(_ *Target, err error) { failure = err },
		})
		if err != nil {
			t.Fatal(err)
		}
		p.Start()
		synctest.Wait()
		p.Stop()
		if failure == nil || failure.Error() != "probe sender panicked: sender bug" {
			t.Errorf("failure %v", failure)
		}
	})
}

func TestGlobalCountsOutliveProbers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tgt := validTarget()
		tgt.Name, tgt.Interval = t.Name(), time.Second
		before := GlobalCounts()[tgt.Name].Sent // -count runs add up
		for range 2 {
			p, err := New([]Target{tgt}, Options{Send: nopSend, Offset: func(time.Duration) time.Duration { return 0 }})
			if err != nil {
				t.Fatal(err)
			}
			p.Start()
			time.Sleep(1500 * time.Millisecond)
			synctest.Wait()
			p.Stop()
		}
		if got := GlobalCounts()[tgt.Name]; got.Sent-before != 4 {
			t.Errorf("process-wide counts %+v, want 4 sent over both probers", got)
		}
	})
}
