package splitfeed

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
)

// strs is pieces as strings, for comparing and printing.
func strs(pieces [][]byte) []string {
	out := make([]string, len(pieces))
	for i, p := range pieces {
		out[i] = string(p)
	}
	return out
}

func TestSplits(t *testing.T) {
	b := []byte("abcdefg")
	for _, tc := range []struct {
		name string
		got  [][]byte
		want []string
	}{
		{"At without cuts", At(b), []string{"abcdefg"}},
		{"At one cut", At(b, 3), []string{"abc", "defg"}},
		{"At the ends", At(b, 0, 7), []string{"", "abcdefg", ""}},
		{"At repeated cut", At(b, 2, 2, 5), []string{"ab", "", "cde", "fg"}},
		{"Bytewise", Bytewise(b), []string{"a", "b", "c", "d", "e", "f", "g"}},
		{"Bytewise empty", Bytewise(nil), []string{}},
		{"Sized", Sized(b, 3), []string{"abc", "def", "g"}},
		{"Sized exact", Sized(b[:6], 3), []string{"abc", "def"}},
		{"Sized larger than b", Sized(b, 100), []string{"abcdefg"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strs(tc.got); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCuts(t *testing.T) {
	b := []byte("abc")
	var got [][]string
	for c, pieces := range Cuts(b) {
		if len(pieces) != 2 || len(pieces[0]) != c {
			t.Errorf("cut %d gave %q", c, strs(pieces))
		}
		got = append(got, strs(pieces))
	}
	want := [][]string{{"", "abc"}, {"a", "bc"}, {"ab", "c"}, {"abc", ""}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	for c := range Cuts(b) {
		if c == 1 {
			break // stopping early must not panic
		}
	}
}

// TestRandom checks that random pieces rejoin to the input, come out the
// same for the same seed, and include empty and long pieces over many
// draws.
func TestRandom(t *testing.T) {
	b := bytes.Repeat([]byte("0123456789"), 30)
	r1, r2 := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(1, 2))
	empty, long := 0, 0
	for range 200 {
		pieces := Random(r1, b)
		if !bytes.Equal(bytes.Join(pieces, nil), b) {
			t.Fatalf("the pieces %q do not rejoin to the input", strs(pieces))
		}
		if again := Random(r2, b); !reflect.DeepEqual(strs(again), strs(pieces)) {
			t.Fatalf("the same seed gave %q, then %q", strs(pieces), strs(again))
		}
		for _, p := range pieces {
			switch {
			case len(p) == 0:
				empty++
			case len(p) > 40:
				long++
			}
		}
	}
	if empty == 0 || long == 0 {
		t.Errorf("%d empty and %d long pieces in 200 splits; want some of each", empty, long)
	}
}
