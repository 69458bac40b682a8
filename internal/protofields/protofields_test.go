package protofields

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func TestEach(t *testing.T) {
	var msg []byte
	msg = AppendVarint(msg, 1, 300)
	msg = AppendDouble(msg, 2, 0.5)
	msg = AppendString(msg, 3, "row")
	msg = AppendBytes(msg, 4, []byte{1, 2})
	msg = protowire.AppendTag(msg, 5, protowire.Fixed32Type)
	msg = protowire.AppendFixed32(msg, 7)
	tests := []struct {
		name string
		in   []byte
		want string // the fields read, or the error
	}{
		{"every type", msg, "1/0=300 2/1=4602678819172646912 3/2=row 4/2=\x01\x02 5/5=7 "},
		{"empty", nil, ""},
		{"a tag cut short", []byte{0x80}, "error"},
		{"a length past the end", AppendBytes(nil, 1, []byte("abc"))[:3], "error"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			err := Each(tc.in, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
				if typ == protowire.BytesType {
					fmt.Fprintf(&b, "%d/%d=%s ", num, typ, raw)
				} else {
					fmt.Fprintf(&b, "%d/%d=%d ", num, typ, v)
				}
				return nil
			})
			got := b.String()
			if err != nil {
				got = "error"
			}
			if got != tc.want {
				t.Errorf("Each: %q, want %q", got, tc.want)
			}
		})
	}
}

// TestEachStops: the first error f returns ends the walk and is returned.
func TestEachStops(t *testing.T) {
	msg := AppendVarint(AppendVarint(nil, 1, 1), 2, 2)
	calls := 0
	stop := fmt.Errorf("stop")
	if err := Each(msg, func(protowire.Number, protowire.Type, uint64, []byte) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("Each returned %v after %d calls, want stop after 1", err, calls)
	}
}
