package ndjson

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/splitfeed"
)

// decode feeds the pieces, closes the stream and returns copies of the
// lines handed out.
func decode(d *Decoder, pieces ...[]byte) []string {
	var got []string
	d.OnLine = func(line []byte) { got = append(got, string(line)) }
	splitfeed.Feed(d, pieces)
	return got
}

// reference is the obvious whole-input decoder the real one must agree with.
func reference(b []byte, max int) (lines []string, oversized int64) {
	parts := strings.Split(string(b), "\n")
	for _, l := range parts {
		// The cap counts a line's bytes up to its LF, CR included.
		if len(l) > max {
			oversized++
			continue
		}
		l = strings.TrimSuffix(l, "\r")
		if strings.TrimLeft(l, " \t\r") == "" {
			continue
		}
		lines = append(lines, l)
	}
	return lines, oversized
}

func TestDecoder(t *testing.T) {
	tests := []struct {
		name      string
		in        []string
		max       int
		want      []string
		oversized int64
	}{
		{"lines", []string{"{\"a\":1}\n{\"b\":2}\n"}, 0, []string{`{"a":1}`, `{"b":2}`}, 0},
		{"crlf", []string{"x\r\ny\r\n"}, 0, []string{"x", "y"}, 0},
		{"split inside a line", []string{"{\"a\"", ":1}\n"}, 0, []string{`{"a":1}`}, 0},
		{"split between cr and lf", []string{"x\r", "\ny\n"}, 0, []string{"x", "y"}, 0},
		{"blank lines skipped", []string{"\n\n  \nx\n\r\n"}, 0, []string{"x"}, 0},
		{"last line without newline", []string{"x\ny"}, 0, []string{"x", "y"}, 0},
		{"oversized line in one write", []string{"0123456789\nok\n"}, 5, []string{"ok"}, 1},
		{"oversized line across writes", []string{"012", "345", "6789\nok\n"}, 5, []string{"ok"}, 1},
		{"oversized carried line finished in the next write", []string{"0123", "45\nok\n"}, 5, []string{"ok"}, 1},
		{"oversized unterminated line", []string{"ok\n0123456789"}, 5, []string{"ok"}, 1},
		{"exactly at the cap", []string{"012", "34\n"}, 5, []string{"01234"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Decoder{MaxLineSize: tt.max}
			var pieces [][]byte
			for _, s := range tt.in {
				pieces = append(pieces, []byte(s))
			}
			got := decode(d, pieces...)
			if !reflect.DeepEqual(got, tt.want) || d.Stats().Oversized != tt.oversized {
				t.Errorf("got %q oversized %d, want %q %d", got, d.Stats().Oversized, tt.want, tt.oversized)
			}
		})
	}
}

// TestEverySplit: every fixture cut at every point gives the lines of the
// whole input and of the reference decoder.
func TestEverySplit(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.ndjson"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		want, _ := reference(b, DefaultMaxLineSize)
		for c, pieces := range splitfeed.Cuts(b) {
			if got := decode(&Decoder{}, pieces...); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s cut at %d: got %q, want %q", f, c, got, want)
			}
		}
		if got := decode(&Decoder{}, splitfeed.Bytewise(b)...); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s byte by byte: got %q", f, got)
		}
	}
}

// TestDoesNotKeepBuffer: the caller's buffer is reused after Write.
func TestDoesNotKeepBuffer(t *testing.T) {
	var got []string
	d := &Decoder{OnLine: func(l []byte) { got = append(got, string(l)) }}
	buf := []byte(`{"part`)
	d.Write(buf)
	copy(buf, "XXXXXX")
	d.Write([]byte("\":1}\n"))
	if len(got) != 1 || got[0] != `{"part":1}` {
		t.Errorf("got %q", got)
	}
}

func TestZeroAllocs(t *testing.T) {
	b, _ := os.ReadFile(filepath.Join("testdata", "ollama_chat.ndjson"))
	d := &Decoder{OnLine: func([]byte) {}}
	for _, size := range []int{1, 7, 64, 4096} {
		writes := splitfeed.Sized(b, size)
		allocs := testing.AllocsPerRun(100, func() {
			for _, w := range writes {
				d.Write(w)
			}
			d.Close()
		})
		if allocs != 0 {
			t.Errorf("%d-byte writes: %v allocs per stream", size, allocs)
		}
	}
}

func FuzzDecoder(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.ndjson"))
	for _, name := range files {
		b, _ := os.ReadFile(name)
		for c := 0; c <= len(b); c++ {
			f.Add(b, uint16(c), uint8(0))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, cut uint16, maxSel uint8) {
		max := DefaultMaxLineSize
		if maxSel > 0 {
			max = int(maxSel)
		}
		c := int(cut) % (len(b) + 1)
		want, wantOver := reference(b, max)
		d := &Decoder{MaxLineSize: max}
		got := decode(d, splitfeed.At(b, c)...)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("cut %d max %d: got %q, want %q", c, max, got, want)
		}
		if d.Stats().Oversized != wantOver {
			t.Fatalf("oversized %d, want %d", d.Stats().Oversized, wantOver)
		}
		if d.Stats().Bytes != int64(len(b)) || bytes.Contains([]byte(strings.Join(got, "")), []byte("\n")) {
			t.Fatal("bytes miscounted or a line end handed out")
		}
	})
}

func BenchmarkDecoder(b *testing.B) {
	body, _ := os.ReadFile(filepath.Join("testdata", "ollama_chat.ndjson"))
	d := &Decoder{OnLine: func([]byte) {}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		d.Write(body)
		d.Close()
	}
}
