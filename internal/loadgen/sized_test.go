package loadgen

import (
	"math"
	"strings"
	"testing"

	"github.com/tokentap/tokentap/internal/meter/tokencount"
)

// TestSizedPrompts: every prompt is exactly the length it was drawn at, as
// the tokenizer counts it, and the lengths have the mean and spread asked
// for.
func TestSizedPrompts(t *testing.T) {
	for _, enc := range []string{"o200k_base", "cl100k_base"} {
		t.Run(enc, func(t *testing.T) {
			c, err := tokencount.New(enc)
			if err != nil {
				t.Fatal(err)
			}
			ps, err := SizedPrompts(enc, 200, 40, 300, 9)
			if err != nil {
				t.Fatal(err)
			}
			lens := make([]float64, len(ps))
			for i, p := range ps {
				lens[i] = float64(c.Tokens([]byte(p)))
			}
			mean, sd := meanSD(lens)
			if math.Abs(mean-200) > 8 || math.Abs(sd-40) > 6 {
				t.Errorf("lengths mean %.1f, sd %.1f; want 200, 40", mean, sd)
			}
			for _, size := range []int{1, 2, 50} {
				same, err := SizedPrompts(enc, size, 0, 20, 1)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range same {
					if n := c.Tokens([]byte(p)); n != int64(size) {
						t.Errorf("a fixed-length prompt %q is %d tokens, want %d", p, n, size)
					}
				}
			}
		})
	}
	for _, bad := range []struct {
		mean, stdev int
		enc, want   string
	}{
		{0, 0, "o200k_base", "mean of at least 1"},
		{10, -1, "o200k_base", "standard deviation"},
		{10, 0, "p50k_base", "p50k_base"},
	} {
		if _, err := SizedPrompts(bad.enc, bad.mean, bad.stdev, 1, 1); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("SizedPrompts(%s, %d, %d): %v, want %q", bad.enc, bad.mean, bad.stdev, err, bad.want)
		}
	}
}
