package stats

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestConcurrentRecord records from many goroutines into rows that are
// created, overflow and, as time passes, go idle and are reused, while
// views are taken: no request is lost or counted twice while its slices
// are in the window, and the race detector sees no unsynchronised access.
func TestConcurrentRecord(t *testing.T) {
	tests := []struct {
		name string
		// step is the time between a goroutine's requests.
		step time.Duration
	}{
		{"one slice", 0},
		{"rows going idle and reused", 7 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const workers, each = 8, 300
			s := newTestStore(4)
			var wg sync.WaitGroup
			stop := make(chan struct{})
			go func() {
				for {
					select {
					case <-stop:
						return
					default:
						s.Aggregate(Window1h, at(time.Duration(each)*tt.step))
					}
				}
			}()
			for w := 0; w < workers; w++ {
				wg.Go(func() {
					for i := 0; i < each; i++ {
						// Ten keys for four rows; as time passes, each
						// worker moves on to new keys.
						k := key("p", "m"+strconv.Itoa((w+i)%10+10*int(time.Duration(i)*tt.step/time.Hour)))
						smp := full(float64(1 + i%5))
						s.Record(&k, &smp, at(time.Duration(i)*tt.step))
					}
				})
			}
			wg.Wait()
			close(stop)
			var total int64
			for _, r := range s.Aggregate(Window1h, at(time.Duration(each-1)*tt.step)).Rows() {
				total += r.Counts.Requests
				if r.Count(Duration) != r.Counts.Requests {
					t.Errorf("%s: %d requests, %d durations", r.Key.Model, r.Counts.Requests, r.Count(Duration))
				}
			}
			if tt.step == 0 && total != workers*each {
				t.Errorf("%d requests counted, %d recorded", total, workers*each)
			}
			if tt.step > 0 && (total == 0 || total > workers*each) {
				t.Errorf("%d requests in the last hour of %d", total, workers*each)
			}
			if s.Rows() > 4 {
				t.Errorf("%d rows over the cap", s.Rows())
			}
		})
	}
}
