package otelexport

import (
	"fmt"
	"sync"
	"testing"
)

func TestValueSetCap(t *testing.T) {
	s := &ValueSet{max: 3}
	for _, v := range []string{"a", "b", "a", "c"} {
		if got := s.Admit(v); got != v {
			t.Errorf("Admit(%q) = %q within the cap", v, got)
		}
	}
	if got := s.Admit("d"); got != OverflowLabelValue {
		t.Errorf("Admit(d) past the cap = %q, want %q", got, OverflowLabelValue)
	}
	if got := s.Admit("b"); got != "b" {
		t.Errorf("a known value past the cap became %q", got)
	}

	// Concurrent admission never lets more than max distinct values in.
	s = &ValueSet{max: 50}
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := map[string]bool{}
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				v := s.Admit(fmt.Sprint((i*7 + g) % 120))
				mu.Lock()
				admitted[v] = true
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	delete(admitted, OverflowLabelValue)
	if len(admitted) > 50 {
		t.Errorf("%d distinct values admitted, cap 50", len(admitted))
	}
}
