package jsonarray

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/splitfeed"
)

// decode feeds the pieces, closes the stream and returns copies of the
// elements handed out.
func decode(d *Decoder, pieces ...[]byte) []string {
	var got []string
	d.OnElement = func(e []byte) { got = append(got, string(e)) }
	splitfeed.Feed(d, pieces)
	return got
}

// reference decodes with encoding/json: every top-level array is unwrapped
// into its elements, every other top-level value is one element. ok is
// false when encoding/json rejects the input, or when it reads two values
// where the framing rules read one (a number or literal run into the next
// token, as in "true1"), so that only inputs with one right answer are
// compared.
func reference(b []byte, max int) (elems []string, oversized int64, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	add := func(raw []byte) {
		if len(raw) > max {
			oversized++
			return
		}
		elems = append(elems, string(raw))
	}
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == io.EOF {
			return elems, oversized, true
		}
		if err != nil {
			return nil, 0, false
		}
		switch raw[0] {
		case '[':
			var arr []json.RawMessage
			if json.Unmarshal(raw, &arr) != nil {
				return nil, 0, false
			}
			for _, e := range arr {
				add(e)
			}
		case '{', '"':
			add(raw)
		default:
			if off := dec.InputOffset(); off < int64(len(b)) && !isDelim(b[off]) {
				return nil, 0, false
			}
			add(raw)
		}
	}
}

func fixtures(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

func TestDecoder(t *testing.T) {
	tests := []struct {
		name      string
		in        []string
		max       int
		want      []string
		stats     Stats // Bytes is filled in
		checkStat bool
	}{
		{name: "gemini pretty array with CRLF separators", in: []string{"[{\n  \"a\": 1\n}\r\n,\r\n{\n  \"b\": 2\n}\r\n]"},
			want: []string{"{\n  \"a\": 1\n}", "{\n  \"b\": 2\n}"}, stats: Stats{Elements: 2}, checkStat: true},
		{name: "vertex compact array", in: []string{"[{\"a\":1},\r\n{\"b\":2}\r\n]"},
			want: []string{`{"a":1}`, `{"b":2}`}, stats: Stats{Elements: 2}, checkStat: true},
		{name: "element split across writes", in: []string{"[{\"a\"", ":[1,", "2]}", ",{}]"},
			want: []string{`{"a":[1,2]}`, `{}`}},
		{name: "brackets and quotes inside strings", in: []string{`[{"t":"]}[{\"\\"},"x]"]`},
			want: []string{`{"t":"]}[{\"\\"}`, `"x]"`}},
		{name: "escape split from its character", in: []string{`[{"t":"a\`, `"]"}]`},
			want: []string{`{"t":"a\"]"}`}},
		{name: "scalars end at delimiters", in: []string{"[1,-2.5e3 ,true,null\r\n,\"s\"]"},
			want: []string{"1", "-2.5e3", "true", "null", `"s"`}},
		{name: "scalar split across writes", in: []string{"[12", "34]"}, want: []string{"1234"}},
		{name: "nested arrays are elements", in: []string{"[[1,[2]],[]]"}, want: []string{"[1,[2]]", "[]"}},
		{name: "empty array", in: []string{" [ ] "}, want: nil, stats: Stats{}, checkStat: true},
		{name: "bare error object instead of an array", in: []string{"{\n  \"error\": {\"code\": 503}\n}\n"},
			want: []string{"{\n  \"error\": {\"code\": 503}\n}"}, stats: Stats{Elements: 1}, checkStat: true},
		{name: "object after the array closes", in: []string{`[{"a":1}]`, "\r\n{\"error\":{}}"},
			want: []string{`{"a":1}`, `{"error":{}}`}},
		{name: "bare number at end of stream is complete", in: []string{"42"}, want: []string{"42"}},
		{name: "stray closers are errors", in: []string{"}][{}]"}, want: []string{"{}"},
			stats: Stats{Elements: 1, Errors: 2}, checkStat: true},
		{name: "element cut off by Close is an error, not handed out", in: []string{`[{"a":1},{"b":`},
			want: []string{`{"a":1}`}, stats: Stats{Elements: 1, Errors: 2}, checkStat: true},
		{name: "string cut off by Close", in: []string{`"abc`}, want: nil, stats: Stats{Errors: 1}, checkStat: true},
		{name: "array left open at Close", in: []string{`[{"a":1},`}, want: []string{`{"a":1}`},
			stats: Stats{Elements: 1, Errors: 1}, checkStat: true},
		{name: "oversized element in one write is skipped", in: []string{`[{"a":"0123456789"},{"b":1}]`}, max: 10,
			want: []string{`{"b":1}`}, stats: Stats{Elements: 1, Oversized: 1}, checkStat: true},
		{name: "oversized element across writes is never buffered whole", in: []string{`[{"a":"012`, `3456789`, `"},{"b":1}]`}, max: 10,
			want: []string{`{"b":1}`}, stats: Stats{Elements: 1, Oversized: 1}, checkStat: true},
		{name: "element exactly at the cap", in: []string{`[{"a":`, `"12"}]`}, max: 10,
			want: []string{`{"a":"12"}`}, stats: Stats{Elements: 1}, checkStat: true},
		{name: "oversized element cut off by Close", in: []string{`[{"a":"0123456789`}, max: 10,
			want: nil, stats: Stats{Oversized: 1, Errors: 1}, checkStat: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &Decoder{MaxElementSize: tt.max}
			var pieces [][]byte
			var n int64
			for _, s := range tt.in {
				pieces = append(pieces, []byte(s))
				n += int64(len(s))
			}
			got := decode(d, pieces...)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			tt.stats.Bytes = n
			if tt.checkStat && d.Stats() != tt.stats {
				t.Errorf("stats %+v, want %+v", d.Stats(), tt.stats)
			}
		})
	}
}

// TestFixturesAgreeWithEncodingJSON: each fixture, whole, gives what
// encoding/json reads in it.
func TestFixturesAgreeWithEncodingJSON(t *testing.T) {
	for name, b := range fixtures(t) {
		t.Run(name, func(t *testing.T) {
			want, _, ok := reference(b, DefaultMaxElementSize)
			if !ok {
				t.Fatal("fixture is not valid JSON")
			}
			d := &Decoder{}
			if got := decode(d, b); !reflect.DeepEqual(got, want) {
				t.Errorf("got %q\nwant %q", got, want)
			}
			if st := d.Stats(); st.Errors != 0 || st.Elements != int64(len(want)) {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestEverySplit: every fixture cut at every point, and fed byte by byte,
// gives the elements of the whole input.
func TestEverySplit(t *testing.T) {
	for name, b := range fixtures(t) {
		whole := decode(&Decoder{}, b)
		for c, pieces := range splitfeed.Cuts(b) {
			if got := decode(&Decoder{}, pieces...); !reflect.DeepEqual(got, whole) {
				t.Fatalf("%s cut at %d: got %q, want %q", name, c, got, whole)
			}
		}
		if got := decode(&Decoder{}, splitfeed.Bytewise(b)...); !reflect.DeepEqual(got, whole) {
			t.Fatalf("%s byte by byte: got %q", name, got)
		}
	}
}

// TestDoesNotKeepBuffer: the caller reuses its buffer after Write.
func TestDoesNotKeepBuffer(t *testing.T) {
	var got []string
	d := &Decoder{OnElement: func(e []byte) { got = append(got, string(e)) }}
	buf := []byte(`[{"part`)
	d.Write(buf)
	copy(buf, "XXXXXXX")
	d.Write([]byte(`":1}]`))
	if len(got) != 1 || got[0] != `{"part":1}` {
		t.Errorf("got %q", got)
	}
}

// genValue makes a random JSON value whose strings are rich in the bytes
// that matter to framing: quotes, backslashes, brackets, commas.
func genValue(r *rand.Rand, depth int) any {
	n := 6
	if depth > 3 {
		n = 4
	}
	switch r.IntN(n) {
	case 0:
		return r.NormFloat64() * 1e3
	case 1:
		return []any{true, false, nil}[r.IntN(3)]
	case 2, 3:
		const alphabet = `ab "\[]{},:é` + "\n\t\x01"
		var sb strings.Builder
		for range r.IntN(12) {
			sb.WriteString(string([]rune(alphabet)[r.IntN(len([]rune(alphabet)))]))
		}
		return sb.String()
	case 4:
		a := make([]any, r.IntN(4))
		for i := range a {
			a[i] = genValue(r, depth+1)
		}
		return a
	default:
		m := map[string]any{}
		for range r.IntN(4) {
			m["k"+strconv.Itoa(r.IntN(100))+`"]}`] = genValue(r, depth+1)
		}
		return m
	}
}

// genStream makes a random streamed array in one of the layouts servers
// use, sometimes followed by a bare error object.
func genStream(r *rand.Rand) []byte {
	elems := make([][]byte, r.IntN(6))
	for i := range elems {
		b, _ := json.Marshal(genValue(r, 0))
		if r.IntN(2) == 0 {
			var ind bytes.Buffer
			json.Indent(&ind, b, "", "  ")
			b = ind.Bytes()
		}
		elems[i] = b
	}
	seps := []string{",", ", ", ",\r\n", "\r\n,\r\n", "\n,\n"}
	var out bytes.Buffer
	out.WriteString([]string{"[", "[\r\n", " [ "}[r.IntN(3)])
	for i, e := range elems {
		if i > 0 {
			out.WriteString(seps[r.IntN(len(seps))])
		}
		out.Write(e)
	}
	out.WriteString([]string{"]", "\r\n]", "\n]\n"}[r.IntN(3)])
	if r.IntN(4) == 0 {
		out.WriteString("\n{\n  \"error\": {\n    \"code\": 503,\n    \"status\": \"UNAVAILABLE\"\n  }\n}\n")
	}
	return out.Bytes()
}

// TestDifferential compares the decoder with encoding/json on random
// arrays, whole and split at random points, with and without a small cap.
func TestDifferential(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for i := range 3000 {
		in := genStream(r)
		max := DefaultMaxElementSize
		if i%3 == 0 {
			max = 1 + r.IntN(64)
		}
		want, wantOver, ok := reference(in, max)
		if !ok {
			t.Fatalf("generator made invalid JSON: %q", in)
		}
		pieces := splitfeed.Random(r, in)
		d := &Decoder{MaxElementSize: max}
		got := decode(d, pieces...)
		if !reflect.DeepEqual(got, want) || d.Stats().Oversized != wantOver || d.Stats().Errors != 0 {
			t.Fatalf("input %q max %d:\n got %q %+v\nwant %q oversized %d", in, max, got, d.Stats(), want, wantOver)
		}
	}
}

func TestZeroAllocs(t *testing.T) {
	for name, b := range fixtures(t) {
		d := &Decoder{OnElement: func([]byte) {}}
		for _, size := range []int{1, 7, 64, 4096} {
			writes := splitfeed.Sized(b, size)
			allocs := testing.AllocsPerRun(100, func() {
				for _, w := range writes {
					d.Write(w)
				}
				d.Close()
			})
			if allocs != 0 {
				t.Errorf("%s in %d-byte writes: %v allocs per stream", name, size, allocs)
			}
		}
	}
}

func TestReset(t *testing.T) {
	d := &Decoder{}
	decode(d, []byte(`[{"a":`))
	d.Write([]byte(`[{"a":`))
	d.Reset()
	if got := decode(d, []byte(`[{"b":1}]`)); !reflect.DeepEqual(got, []string{`{"b":1}`}) {
		t.Errorf("after Reset got %q", got)
	}
	if st := d.Stats(); st.Elements != 1 || st.Errors != 0 {
		t.Errorf("stats after Reset %+v", st)
	}
}
