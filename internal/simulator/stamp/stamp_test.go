package stamp

import (
	"bytes"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		line string
		want int64
		ok   bool
	}{
		{name: "stamp", line: Prefix + "1767225600123456789", want: 1767225600123456789, ok: true},
		{name: "small", line: Prefix + "42", want: 42, ok: true},
		{name: "keep-alive comment", line: ": ping"},
		{name: "data line", line: "data: " + Prefix + "1"},
		{name: "no digits", line: Prefix},
		{name: "not digits", line: Prefix + "12a4"},
		{name: "sign", line: Prefix + "-5"},
		{name: "overflows int64", line: Prefix + "9999999999999999999"},
		{name: "trailing space", line: Prefix + "12 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Parse([]byte(tc.line))
			if ok != tc.ok || (ok && got.UnixNano() != tc.want) {
				t.Errorf("Parse(%q) = %v, %v; want %d, %v", tc.line, got.UnixNano(), ok, tc.want, tc.ok)
			}
		})
	}
}

// TestAppendParses checks that what Append writes is one line, ended as
// asked, that Parse reads back to the same nanosecond.
func TestAppendParses(t *testing.T) {
	sent := time.Unix(1767225600, 123456789)
	for _, tc := range []struct {
		name string
		crlf bool
		end  string
	}{
		{name: "LF", end: "\n"},
		{name: "CRLF", crlf: true, end: "\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := Append([]byte("before\n"), sent, tc.crlf)
			line, found := bytes.CutPrefix(b, []byte("before\n"))
			if !found {
				t.Fatalf("Append changed what b held: %q", b)
			}
			line, found = bytes.CutSuffix(line, []byte(tc.end))
			if !found || bytes.ContainsAny(line, "\r\n") {
				t.Fatalf("Append wrote %q; want one line ended by %q", b, tc.end)
			}
			if got, ok := Parse(line); !ok || !got.Equal(sent) {
				t.Errorf("Parse(%q) = %v, %v; want %v", line, got, ok, sent)
			}
		})
	}
}
