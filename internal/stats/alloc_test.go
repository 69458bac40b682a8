package stats

import (
	"strconv"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/meter"
)

// TestRecordAllocationFree: recording into an existing row allocates
// nothing, in the same slice and as the rings turn, once each slice has
// been used; the overflow row too.
func TestRecordAllocationFree(t *testing.T) {
	tests := []struct {
		name    string
		maxRows int
		key     Key
		// step is how far each recorded request is after the previous.
		step time.Duration
	}{
		{"same slice", 0, key("openai", "gpt-4o-mini"), 0},
		{"with labels", 0, key("openai", "gpt-4o-mini", "app", "chat", "team", "search"), time.Millisecond},
		{"unsorted labels", 0, key("openai", "gpt-4o-mini", "team", "search", "app", "chat"), time.Millisecond},
		{"rings turning", 0, key("anthropic", "claude"), 7 * time.Second},
		{"overflow row", 1, key("p", "overflowing"), 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if raceEnabled && tt.step > time.Second {
				t.Skip("under -race, a slice's first point allocates (see race_on_test.go); run without -race")
			}
			s := newTestStore(tt.maxRows)
			record(s, key("p", "first"), full(1), 0)
			smp := full(0.5)
			smp.Estimated, smp.Inflight = true, 5
			smp.RateLimit = &rateLimited
			k := tt.key
			// Warm up: a little over a day of requests uses every slice.
			var d time.Duration
			for ; d < 24*time.Hour+6*time.Minute; d += 5 * time.Second {
				s.Record(&k, &smp, at(d))
			}
			allocs := testing.AllocsPerRun(1000, func() {
				d += tt.step
				s.Record(&k, &smp, at(d))
			})
			if allocs != 0 {
				t.Errorf("%v allocations per request", allocs)
			}
		})
	}
}

// TestSampleOfAllocationFree: turning a measurement into a sample
// allocates nothing either.
func TestSampleOfAllocationFree(t *testing.T) {
	m := measurement()
	var smp Sample
	if allocs := testing.AllocsPerRun(1000, func() { smp = SampleOf(m) }); allocs != 0 {
		t.Errorf("%v allocations", allocs)
	}
	_ = smp
}

func measurement() *meter.Measurement {
	return &meter.Measurement{
		FirstToken: 200 * time.Millisecond, FirstVisibleToken: 250 * time.Millisecond,
		LastToken: 2200 * time.Millisecond, End: 2300 * time.Millisecond,
		Usage:   meter.Usage{InputTokens: 100, OutputTokens: 81, Source: meter.UsageReported},
		Outcome: meter.OutcomeCompleted,
	}
}

// BenchmarkRecord is one request into an existing row, with two labels.
func BenchmarkRecord(b *testing.B) {
	s := NewStore(Options{})
	k := key("openai", "gpt-4o-mini", "app", "chat", "team", "search")
	smp := SampleOf(measurement())
	now := time.Now()
	s.Record(&k, &smp, now)
	b.ReportAllocs()
	for b.Loop() {
		s.Record(&k, &smp, now)
	}
}

// BenchmarkRecordParallel is requests of 16 rows from all cores at once.
func BenchmarkRecordParallel(b *testing.B) {
	s := NewStore(Options{})
	smp := SampleOf(measurement())
	keys := make([]Key, 16)
	for i := range keys {
		keys[i] = key("openai", "model-"+strconv.Itoa(i))
		s.Record(&keys[i], &smp, time.Now())
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		now := time.Now()
		for pb.Next() {
			k := keys[i%len(keys)]
			s.Record(&k, &smp, now)
			i++
		}
	})
}

// BenchmarkRecordStrata is BenchmarkRecord with the in-flight level known,
// so that the request also lands in its in-flight bucket and its strata
// cell.
func BenchmarkRecordStrata(b *testing.B) {
	s := NewStore(Options{})
	k := key("openai", "gpt-4o-mini", "app", "chat", "team", "search")
	smp := SampleOf(measurement())
	smp.Inflight = 5
	now := time.Now()
	s.Record(&k, &smp, now)
	b.ReportAllocs()
	for b.Loop() {
		s.Record(&k, &smp, now)
	}
}
