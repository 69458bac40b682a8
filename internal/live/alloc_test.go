//go:build !race

package live

import (
	"testing"
	"time"
)

// TestAllocations: an exchange's whole life in the table, on a key already
// there, allocates nothing; a write is one store.
func TestAllocations(t *testing.T) {
	var tb Table
	k := Key{"openai", "gpt-4o"}
	var warm Stream
	tb.Join(&warm, k, time.Second)
	warm.Leave()
	var s Stream
	at := time.Now()
	if n := testing.AllocsPerRun(1000, func() {
		tb.Join(&s, k, time.Second)
		s.Wrote(at)
		s.Leave()
	}); n != 0 {
		t.Errorf("join, write, leave: %v allocations, want 0", n)
	}
}

func BenchmarkWrote(b *testing.B) {
	var tb Table
	var s Stream
	tb.Join(&s, Key{"openai", "gpt-4o"}, time.Second)
	at := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		s.Wrote(at)
	}
}

func BenchmarkJoinLeave(b *testing.B) {
	var tb Table
	k := Key{"openai", "gpt-4o"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var s Stream
		for pb.Next() {
			tb.Join(&s, k, time.Second)
			s.Leave()
		}
	})
}
