package splitfeed

import (
	"reflect"
	"testing"
)

// keeper is a decoder that keeps every write it is given without copying
// it, as a faulty decoder would, and records what each write held at the
// time.
type keeper struct {
	kept, seen []string
	views      [][]byte
	closed     int
	short      bool // Write reports one byte fewer than it was given
}

func (k *keeper) Write(p []byte) (int, error) {
	k.seen = append(k.seen, string(p))
	k.views = append(k.views, p)
	if k.short && len(p) > 0 {
		return len(p) - 1, nil
	}
	return len(p), nil
}

func (k *keeper) Close() {
	k.closed++
	for _, v := range k.views {
		k.kept = append(k.kept, string(v))
	}
}

func TestFeed(t *testing.T) {
	k := &keeper{}
	Feed(k, At([]byte("abcdef"), 2, 2, 5))
	if want := []string{"ab", "", "cde", "f"}; !reflect.DeepEqual(k.seen, want) {
		t.Errorf("writes %q, want %q", k.seen, want)
	}
	if k.closed != 1 {
		t.Errorf("closed %d times, want once", k.closed)
	}
	// What a decoder kept of a write after the call is overwritten.
	if want := []string{"XX", "", "XXX", "X"}; !reflect.DeepEqual(k.kept, want) {
		t.Errorf("the kept writes read %q at Close, want %q", k.kept, want)
	}
}

func TestFeedShortWritePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Feed did not panic on a short write")
		}
	}()
	Feed(&keeper{short: true}, [][]byte{[]byte("abc")})
}
