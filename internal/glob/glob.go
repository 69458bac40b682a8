// Package glob matches model names against the patterns users write in
// price and slo lines: * stands for any run of characters, / included, and
// nothing else is special, because model names are full of the characters
// (dots, colons, brackets) that richer pattern languages reserve.
package glob

import "strings"

// Match reports whether s matches pattern.
func Match(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, last)
}
