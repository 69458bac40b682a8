package stats

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// fillTimes are offsets at which one record fills a different slice of
// every ring: the day's 24 slices, the hour's 12, then the 5 minutes' 10,
// then the minute's 6, so that after them every slice of every window
// holds data.
func fillTimes(start time.Duration) []time.Duration {
	var ts []time.Duration
	for i := 0; i < 23; i++ {
		ts = append(ts, start+time.Duration(i)*time.Hour)
	}
	start += 23 * time.Hour
	for i := 0; i < 12; i++ {
		ts = append(ts, start+time.Duration(i)*5*time.Minute)
	}
	for i := 0; i < 10; i++ {
		ts = append(ts, start+55*time.Minute+time.Duration(i)*30*time.Second)
	}
	for i := 0; i < 6; i++ {
		ts = append(ts, start+60*time.Minute+time.Duration(i)*10*time.Second)
	}
	return ts
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestMemoryBound throws 10,000 distinct models and label values at a store
// with the default cap, each with every metric in every slice of every
// window and with keys longer than MaxKeyString, then another 10,000 after
// the first have been idle for an hour (which reuse the idle rows): the heap the store holds stays
// under MemoryBound, and near it, since the worst case is what this is.
func TestMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates the store's full bound")
	}
	const distinct = 10000
	pad := strings.Repeat("x", MaxKeyString)
	keys := func(round int) []Key {
		ks := make([]Key, distinct)
		for i := range ks {
			id := fmt.Sprintf("%d-%d-", round, i)
			ks[i] = key("provider", id+pad, "team", id+pad, "app", id+pad)
		}
		return ks
	}
	before := heapInUse()
	s := NewStore(Options{Origin: origin})
	bound := MemoryBound(0)

	for round, start := range []time.Duration{0, 26 * time.Hour} {
		ks := keys(round)
		times := fillTimes(start)
		// What the hour holds at the last fill time: the requests in its
		// last 12 slices of 5 minutes.
		hourSlice := int64(5 * time.Minute)
		inHour := func(d time.Duration) bool {
			return floorDiv(int64(d), hourSlice) > floorDiv(int64(times[len(times)-1]), hourSlice)-12
		}
		var wantTotal, wantOverflow int64
		for i, d := range times {
			for j := range ks {
				// The first keys take the rows and come back at every
				// fill time; each of the others comes once, and must
				// land in the overflow row.
				if j >= 2*DefaultMaxRows && j%len(times) != i {
					continue
				}
				// Spread the values so each sketch's bins span their
				// bound (they are allocated full size anyway).
				var smp Sample
				for m := range NumMetrics {
					smp.Set(Metric(m), 1+float64((i*31+j)%200))
				}
				s.Record(&ks[j], &smp, at(d))
				if inHour(d) {
					wantTotal++
					if j >= DefaultMaxRows {
						wantOverflow++
					}
				}
			}
		}
		// Then every cell of (in-flight bucket x input bucket), which
		// fills every in-flight bucket too, in both halves of every
		// window's in-flight ring and strata, for every row and the
		// overflow row.
		last := times[len(times)-1]
		for j := 0; j <= DefaultMaxRows; j++ {
			for w := range numWindows {
				for _, d := range []time.Duration{last, last - time.Duration(inflightHalf(Window(w)))} {
					for b := range numInflightBuckets {
						for nb := range numInputBuckets {
							var smp Sample
							for m := range NumMetrics {
								smp.Set(Metric(m), 1+float64((b*31+nb*7+j)%200))
							}
							tokens, _ := InputRange(nb)
							smp.Set(InputTokens, float64(tokens))
							smp.Inflight = int64(1) << b
							s.Record(&ks[j], &smp, at(d))
							if inHour(d) {
								wantTotal++
								if j >= DefaultMaxRows {
									wantOverflow++
								}
							}
						}
					}
				}
			}
		}
		used := heapInUse() - before
		t.Logf("round %d: %d rows, heap held %.1f MiB, bound %.1f MiB (%.0f%%)",
			round, s.Rows(), float64(used)/(1<<20), float64(bound)/(1<<20), 100*float64(used)/float64(bound))
		if s.Rows() != DefaultMaxRows {
			t.Errorf("%d rows, want the cap %d", s.Rows(), DefaultMaxRows)
		}
		if int64(used) > bound {
			t.Errorf("heap held %d bytes, over the bound %d", used, bound)
		}
		// The keys here are shorter than the longest a row may hold; the
		// sketches, which are nearly all of the bound, are all there.
		if int64(used) < bound*8/10 {
			t.Errorf("heap held %d bytes, under 80%% of the bound %d: the test did not fill the store", used, bound)
		}
		// The hour holds every request of the round, the overflow row
		// those of every key past the cap.
		a := s.Aggregate(Window1h, at(times[len(times)-1]))
		var total, overflow int64
		for _, r := range a.Rows() {
			total += r.Counts.Requests
			if r.Overflow {
				overflow = r.Counts.Requests
			}
		}
		if total != wantTotal || overflow != wantOverflow {
			t.Errorf("the hour holds %d requests, %d of them in the overflow row; want %d and %d", total, overflow, wantTotal, wantOverflow)
		}
	}
	runtime.KeepAlive(s)
}

// TestStructSizes: the structs the memory bound counts by their allocation
// size fit in it.
func TestStructSizes(t *testing.T) {
	tests := []struct {
		name       string
		size, have uintptr
	}{
		{"row", unsafe.Sizeof(row{}), rowStructBytes},
		{"strata", unsafe.Sizeof(rowStrata{}), strataStructBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.size > tt.have {
				t.Errorf("%d bytes, the bound counts %d", tt.size, tt.have)
			}
		})
	}
}

// TestMemoryDocumented keeps docs/live-stats.md's figures for the default
// cap: a row's bound in KiB and the store's in MiB, rounded up.
func TestMemoryDocumented(t *testing.T) {
	const rowKiB, storeMiB = 1578, 397 // "1,578 KiB" and "397 MiB" in docs/live-stats.md
	if got := (RowBound + 1023) / 1024; got != rowKiB {
		t.Errorf("RowBound = %d KiB, the docs say %d", got, rowKiB)
	}
	if got := (MemoryBound(0) + 1<<20 - 1) >> 20; got != storeMiB {
		t.Errorf("MemoryBound(default) = %d MiB, the docs say %d", got, storeMiB)
	}
}
