package glob

import "testing"

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"gpt-4o", "gpt-4o", true},
		{"gpt-4o", "gpt-4o-mini", false},
		{"gpt-4o*", "gpt-4o-mini", true},
		{"*", "", true},
		{"*/gpt-4o", "openai/gpt-4o", true},
		{"claude-*-4-5*", "claude-sonnet-4-5-20250929", true},
		{"claude-*-4-5*", "claude-sonnet-4-6", false},
		{"*x*x", "x", false},
		{"a*b*b", "ab", false},
		{"a*b*b", "abb", true},
		{"model[1].v2?", "model[1].v2?", true},
		{"model[1].v2?", "model1.v2", false},
	}
	for _, tt := range tests {
		if got := Match(tt.pattern, tt.s); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}
