package exchange

import (
	"fmt"
	"sync"
	"testing"
)

func TestTableFor(t *testing.T) {
	for _, tc := range []struct {
		name       string
		a, b       [3]any // upstream, port, model
		wantShared bool
	}{
		{"same upstream and model", [3]any{"api.openai.com", 443, "gpt-4o"}, [3]any{"api.openai.com", 443, "gpt-4o"}, true},
		{"another model", [3]any{"api.openai.com", 443, "gpt-4o"}, [3]any{"api.openai.com", 443, "gpt-4o-mini"}, false},
		{"another port", [3]any{"localhost", 8000, "m"}, [3]any{"localhost", 8001, "m"}, false},
		{"another host", [3]any{"a", 80, "m"}, [3]any{"b", 80, "m"}, false},
		{"no model known", [3]any{"a", 80, ""}, [3]any{"a", 80, ""}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tab inflightTable
			ca := tab.For(tc.a[0].(string), tc.a[1].(int), tc.a[2].(string))
			cb := tab.For(tc.b[0].(string), tc.b[1].(int), tc.b[2].(string))
			if got := ca == cb; got != tc.wantShared {
				t.Fatalf("shared counter = %v, want %v", got, tc.wantShared)
			}
		})
	}
}

func TestCounterBeginEnd(t *testing.T) {
	var tab inflightTable
	c := tab.For("u", 1, "m")
	for want := int64(0); want < 3; want++ {
		if got := c.Begin(); got != want {
			t.Fatalf("Begin #%d: ahead = %d, want %d", want+1, got, want)
		}
	}
	c.End()
	if got := c.Begin(); got != 2 {
		t.Fatalf("after one End, ahead = %d, want 2", got)
	}
	c.End()
	c.End()
	c.End()
	if got := c.Begin(); got != 0 {
		t.Fatalf("after every End, ahead = %d, want 0", got)
	}
}

// TestTableOverflow holds the bound: past maxInflightKeys pairs, new ones share
// the overflow counter and the table grows no more, while the pairs
// already known keep their own.
func TestTableOverflow(t *testing.T) {
	var tab inflightTable
	first := tab.For("u", 1, "model-0")
	for i := 1; i < maxInflightKeys; i++ {
		tab.For("u", 1, fmt.Sprintf("model-%d", i))
	}
	if got := tab.keys.Load(); got != maxInflightKeys {
		t.Fatalf("keys = %d, want %d", got, maxInflightKeys)
	}
	a, b := tab.For("u", 1, "late-a"), tab.For("u", 1, "late-b")
	if a != &tab.overflow || b != &tab.overflow {
		t.Fatal("pairs past the bound did not get the overflow counter")
	}
	if got := tab.keys.Load(); got != maxInflightKeys {
		t.Fatalf("keys after overflow = %d, want %d", got, maxInflightKeys)
	}
	if tab.For("u", 1, "model-0") != first {
		t.Fatal("a known pair lost its counter once the table was full")
	}
}

// TestTableConcurrent races many goroutines on one new pair: every one
// must get the same counter, and the key count must rise by one.
func TestTableConcurrent(t *testing.T) {
	var tab inflightTable
	const n = 64
	got := make([]*inflightCounter, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			got[i] = tab.For("u", 1, "m")
			got[i].Begin()
		})
	}
	wg.Wait()
	for i := range got {
		if got[i] != got[0] {
			t.Fatalf("goroutine %d got another counter", i)
		}
	}
	if k := tab.keys.Load(); k != 1 {
		t.Fatalf("keys = %d, want 1", k)
	}
	if ahead := got[0].Begin(); ahead != n {
		t.Fatalf("ahead after %d concurrent Begins = %d, want %d", n, ahead, n)
	}
}

func BenchmarkFor(b *testing.B) {
	var tab inflightTable
	tab.For("api.openai.com", 443, "gpt-4o")
	b.ReportAllocs()
	for b.Loop() {
		tab.For("api.openai.com", 443, "gpt-4o")
	}
}
