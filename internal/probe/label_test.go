package probe

import (
	"strings"
	"testing"
)

func TestRecognize(t *testing.T) {
	tok := Token()
	if len(tok) != 32 || Token() != tok {
		t.Fatalf("token %q: want 32 hex digits, the same every call", tok)
	}
	tests := []struct {
		name  string
		value string
		want  bool
	}{
		{"the token", tok, true},
		{"empty", "", false},
		{"another token", strings.Repeat("0", 32), false},
		{"the token with a byte changed", tok[:31] + string(tok[31]^1), false},
		{"a prefix of the token", tok[:16], false},
		{"the token and more", tok + "0", false},
		{"the token in upper case", strings.ToUpper(tok), strings.ToUpper(tok) == tok},
		{"true", "true", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Recognize(tt.value); got != tt.want {
				t.Errorf("Recognize(%q) = %v, want %v", tt.value, got, tt.want)
			}
		})
	}
}

func TestRecognizeAllocatesNothing(t *testing.T) {
	tok, other := Token(), strings.Repeat("f", 32)
	if n := testing.AllocsPerRun(100, func() { Recognize(tok); Recognize(other) }); n != 0 {
		t.Errorf("%v allocations per call", n)
	}
}
