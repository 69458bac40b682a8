package loadgen

import (
	"strings"
	"testing"
)

func TestReadPrompts(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    string
		want    []string
		wantErr string
	}{
		{name: "one per line", file: "first\nsecond\n", want: []string{"first", "second"}},
		{name: "blank lines, comments and spaces", file: "\n# a comment\n  first  \r\n\n#another\nsecond", want: []string{"first", "second"}},
		{name: "JSON string with newlines", file: `"line one\nline two"` + "\nplain", want: []string{"line one\nline two", "plain"}},
		{name: "bad JSON string", file: `"unterminated`, wantErr: "line 1"},
		{name: "nothing but comments", file: "# only\n\n", wantErr: "no prompts"},
		{name: "empty", file: "", wantErr: "no prompts"},
		{name: "line too long", file: strings.Repeat("x", maxPromptLine+1), wantErr: "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadPrompts(strings.NewReader(tc.file))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
