package meter

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

func TestRawMembers(t *testing.T) {
	tests := []struct {
		name string
		obj  string
		want []string // key=value pairs, both raw
	}{
		{"flat", `{"a":1,"b":"x","c":true,"d":null}`, []string{`a=1`, `b="x"`, `c=true`, `d=null`}},
		{"whitespace everywhere", " {\n \"a\" :\t1 ,\r\n\"b\": [1, 2] }  ", []string{`a=1`, `b=[1, 2]`}},
		{"escapes kept, quotes and braces inside strings", `{"t":"a\"}{[\\","u":{"v":"}"}}`, []string{`t="a\"}{[\\"`, `u={"v":"}"}`}},
		{"a run of backslashes before a quote", `{"a":"x\\\\","b":"\\\"","c":2}`, []string{`a="x\\\\"`, `b="\\\""`, `c=2`}},
		{"nested", `{"delta":{"toolUse":{"input":"{\"k\": [1]}"}},"p":"abc"}`, []string{`delta={"toolUse":{"input":"{\"k\": [1]}"}}`, `p="abc"`}},
		{"keys as written", `{"a\"b":1,"caf\u00e9":2,"":3}`, []string{`a\"b=1`, `caf\u00e9=2`, `=3`}},
		{"duplicate keys, in order", `{"a":1,"a":2}`, []string{`a=1`, `a=2`}},
		{"scalars as written", `{"n":-1.5e3,"x":NaN,"y":tru}`, []string{`n=-1.5e3`, `x=NaN`, `y=tru`}},
		{"empty object", `{}`, nil},
		{"empty object with space", "{ \n}", nil},
		{"not an object", `["a"]`, nil},
		{"a string", `"{\"a\":1}"`, nil},
		{"unterminated string stops", `{"a":1,"b":"oops`, []string{`a=1`}},
		{"unterminated key stops", `{"a":1,"b`, []string{`a=1`}},
		{"unterminated outer object: complete members are read", `{"a":{"b":1}`, []string{`a={"b":1}`}},
		{"unterminated inner object stops", `{"a":{"b":1,"c":2`, nil},
		{"missing colon stops", `{"a" 1}`, nil},
		{"missing value stops", `{"a":}`, nil},
		{"missing value before comma stops", `{"a":,"b":1}`, nil},
		{"control character value stops", "{\"a\":\x00}", nil},
		{"missing comma stops after the member", `{"a":1 "b":2}`, []string{`a=1`}},
		{"a scalar ends where a string starts", `{"a":0"x"}`, []string{`a=0`}},
		{"a scalar ends where an array starts", `{"a":{"b":0[}}`, []string{`a={"b":0[}}`}},
		{"trailing comma", `{"a":1,}`, []string{`a=1`}},
		{"unquoted key stops", `{a:1}`, nil},
		{"empty", ``, nil},
		{"space", `   `, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			rawMembers(tt.obj, func(k, v string) bool {
				got = append(got, k+"="+v)
				return true
			})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if walked, _ := walkedMembers(tt.obj); !reflect.DeepEqual(walked, tt.want) {
				t.Errorf("rawWalkMembers, descending, got %q, want %q", walked, tt.want)
			}
		})
	}
	t.Run("stops when told", func(t *testing.T) {
		n := 0
		rawMembers(`{"a":1,"b":2,"c":3}`, func(k, v string) bool {
			n++
			return k != "b"
		})
		if n != 2 {
			t.Errorf("%d calls, want 2", n)
		}
	})
}

// walkedMembers lists the members of obj as rawWalkMembers hands them out
// to a reader that descends into every object and array, as the chat
// reader descends into choices and delta; each value is what the walk
// measured of it, or the value as rawValueEnd finds it where the descent
// failed. n is what rawWalkMembers returned.
func walkedMembers(obj string) (members []string, n int) {
	n = rawWalkMembers(obj, collectMembers(&members))
	return members, n
}

// collectMembers is walkedMembers' callback: it appends each member to
// members as key=value, descending into objects and arrays.
func collectMembers(members *[]string) func(k, rest string) int {
	return func(k, rest string) int {
		n := walkedLen(rest)
		if n > 0 {
			*members = append(*members, k+"="+rest[:n])
		} else if v := rawValueAt(rest); v != "" {
			*members = append(*members, k+"="+v)
		}
		return n
	}
}

// checkResume holds rawKeyStart and rawWalkMembersFrom to rawWalkMembers:
// each member's key starts where rawKeyStart says, and a walk resumed
// there hands out that member and the ones after it, as members lists
// them.
func checkResume(t *testing.T, obj string, members []string) {
	t.Helper()
	var starts []int
	rawWalkMembers(obj, func(k, rest string) int {
		ks := rawKeyStart(obj, len(obj)-len(rest), len(k))
		if ks < 0 || obj[ks] != '"' || obj[ks+1:ks+1+len(k)] != k {
			t.Fatalf("%q: rawKeyStart put key %q at %d", obj, k, ks)
		}
		starts = append(starts, ks)
		return walkedLen(rest)
	})
	for j, ks := range starts {
		var tail []string
		rawWalkMembersFrom(obj, ks, collectMembers(&tail))
		if want := members[min(j, len(members)):]; !reflect.DeepEqual(tail, want) && !(len(tail) == 0 && len(want) == 0) {
			t.Fatalf("%q: the walk resumed at %d handed out %q, want %q", obj, ks, tail, want)
		}
	}
}

// walkedLen descends into the value at the start of rest, as a walker's
// callback: the length it walked, or 0 (a scalar) or -1 (malformed).
func walkedLen(rest string) int {
	switch rawKindOf(rest) {
	case kindObject:
		_, n := walkedMembers(rest)
		return n
	case kindArray:
		return rawWalkElements(rest, walkedLen)
	}
	return 0
}

func TestRawWalkLength(t *testing.T) {
	tests := []struct {
		name, in string
		want     int
	}{
		{"object", `{"a":1,"b":"x"}`, 15},
		{"nested, with space and trailing text", `{ "a" : [1, {"b":[]} ] , "c":{} } tail`, 33},
		{"brackets inside strings", `{"a":"}]","b":["]"]}`, 20},
		{"empty object", `{}`, 2},
		{"empty array", `[ ]`, 3},
		{"array of arrays", `[[1],[2,[3]]]`, 13},
		{"unterminated", `{"a":1`, -1},
		{"unterminated inside", `{"a":[1,2}`, -1},
		{"trailing comma", `{"a":1,}`, -1},
		{"missing comma", `{"a":1 "b":2}`, -1},
		{"not an object", `1`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := walkedLen(tt.in); got != tt.want {
				t.Errorf("walked %d bytes, want %d", got, tt.want)
			}
		})
	}
}

func TestRawMember(t *testing.T) {
	tests := []struct {
		obj, key, want string
	}{
		{`{"a":1,"b":{"c":2}}`, "b", `{"c":2}`},
		{`{"a":1,"a":2}`, "a", `1`}, // the first, as gjson's Get
		{`{"a":1}`, "b", ``},
		{`{"ab":1}`, "a", ``},
		{`[{"a":1}]`, "a", ``},
		{`"a"`, "a", ``},
		{``, "a", ``},
		{`{"b":{"a":1}}`, "a", ``}, // not nested
	}
	for _, tt := range tests {
		if got := rawMember(tt.obj, tt.key); got != tt.want {
			t.Errorf("rawMember(%s, %q) = %q, want %q", tt.obj, tt.key, got, tt.want)
		}
	}
}

func TestRawElements(t *testing.T) {
	tests := []struct {
		name string
		arr  string
		want []string
	}{
		{"mixed", `[1, "a,]", {"b":[2]}, [3,4], null]`, []string{`1`, `"a,]"`, `{"b":[2]}`, `[3,4]`, `null`}},
		{"whitespace", " [\n1\t,\r\n2 ] ", []string{`1`, `2`}},
		{"empty", `[]`, nil},
		{"empty with space", `[ ]`, nil},
		{"leading comma stops", `[,1]`, nil},
		{"double comma stops", `[1,,2]`, []string{`1`}},
		{"trailing comma", `[1,]`, []string{`1`}},
		{"unterminated: complete elements are read", `[1,{"a":2}`, []string{`1`, `{"a":2}`}},
		{"unterminated element stops", `[1,{"a":2`, []string{`1`}},
		{"not an array", `{"a":[1]}`, nil},
		{"nothing", ``, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			rawElements(tt.arr, func(v string) bool {
				got = append(got, v)
				return true
			})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if n := rawLen(tt.arr); n != int64(len(tt.want)) {
				t.Errorf("rawLen = %d, want %d", n, len(tt.want))
			}
		})
	}
}

func TestRawStrings(t *testing.T) {
	long := strings.Repeat(`ab\n`, 40)
	tests := []struct {
		raw     string
		ok      bool
		text    string // the inside, escapes kept
		decoded string
	}{
		{`"abc"`, true, `abc`, "abc"},
		{`""`, true, ``, ""},
		{`"line\nbreak"`, true, `line\nbreak`, "line\nbreak"},
		{`"\"quoted\" \\ \/"`, true, `\"quoted\" \\ \/`, `"quoted" \ /`},
		{`"\b\f\r\t"`, true, `\b\f\r\t`, "\b\f\r\t"},
		{`"caf\u00e9 \u00E9"`, true, `caf\u00e9 \u00E9`, "café é"},
		{`"\ud83d\ude00!"`, true, `\ud83d\ude00!`, "😀!"},
		{`"lone \ud83d high"`, true, `lone \ud83d high`, "lone \uFFFD high"},
		{`"lone \ude00 low"`, true, `lone \ude00 low`, "lone \uFFFD low"},
		{`"\ud83d\u0041"`, true, `\ud83d\u0041`, "\uFFFDA"},
		{`"\ud83d\ud83d\ude00"`, true, `\ud83d\ud83d\ude00`, "\uFFFD😀"},
		{`"\u0000"`, true, `\u0000`, "\x00"},
		{`"not an \x escape"`, true, `not an \x escape`, `not an \x escape`},
		{`"short \u12"`, true, `short \u12`, `short \u12`},
		{`"bad \u12g4"`, true, `bad \u12g4`, `bad \u12g4`},
		{`"é raw"`, true, `é raw`, "é raw"},
		{`"` + long + `"`, true, long, strings.Repeat("ab\n", 40)},
		{`12`, false, ``, ``},
		{`null`, false, ``, ``},
		{`"`, false, ``, ``},
		{``, false, ``, ``},
	}
	for _, tt := range tests {
		text, ok := rawText(tt.raw)
		if ok != tt.ok || text != tt.text {
			t.Errorf("rawText(%s) = %q, %v; want %q, %v", tt.raw, text, ok, tt.text, tt.ok)
		}
		var b rawBuf
		dec, ok := rawStr(tt.raw, b[:0])
		if ok != tt.ok || string(dec) != tt.decoded {
			t.Errorf("rawStr(%s) = %q, %v; want %q, %v", tt.raw, dec, ok, tt.decoded, tt.ok)
		}
		if !tt.ok {
			continue
		}
		// Where encoding/json has a say, it agrees.
		var want string
		if json.Unmarshal([]byte(tt.raw), &want) == nil && utf8.ValidString(tt.raw) && string(dec) != want {
			t.Errorf("rawStr(%s) = %q, encoding/json says %q", tt.raw, dec, want)
		}
	}
	// With no escape, the value is the event's own bytes, not a copy.
	raw := `"model-name"`
	var b rawBuf
	if s, _ := rawStr(raw, b[:0]); &s[0] != &bytesOf(raw)[1] {
		t.Error("rawStr copied a string without escapes")
	}
}

// TestRawNumbers: numbers, and the values read as numbers, read as gjson
// reads them, so that the dialects moved off gjson measure the same.
func TestRawNumbers(t *testing.T) {
	for _, raw := range []string{
		"0", "12", "-3", "1.9", "-1.9", "1e3", "2.5E-1", "9007199254740993",
		"-9007199254740993", "12345678901234567890", "-12345678901234567890",
		"99999999999999999999", "-99999999999999999999", "1e400", "-1e400",
		"NaN", "nan", "Infinity", "-Infinity", "+5", "1x",
		"null", "true", "false", `"12"`, `"-7"`, `"1.5"`, `"x"`, `"\u0031"`, `""`,
		"{}", `{"a":1}`, "[]", "[1]",
	} {
		g := gjson.Parse(raw)
		wantKind := map[gjson.Type]rawKind{
			gjson.Null: kindNull, gjson.False: kindFalse, gjson.True: kindTrue,
			gjson.Number: kindNumber, gjson.String: kindString,
		}[g.Type]
		if g.IsObject() {
			wantKind = kindObject
		} else if g.IsArray() {
			wantKind = kindArray
		}
		if k := rawKindOf(raw); k != wantKind {
			t.Errorf("rawKindOf(%s) = %d, want %d", raw, k, wantKind)
		}
		n, ok := rawInt(raw)
		if ok != (g.Type == gjson.Number) || (ok && n != g.Int()) {
			t.Errorf("rawInt(%s) = %d, %v; gjson says %d, %v", raw, n, ok, g.Int(), g.Type == gjson.Number)
		}
		f, ok := rawFloat(raw)
		if ok != (g.Type == gjson.Number) || (ok && f != g.Float() && !(math.IsNaN(f) && math.IsNaN(g.Float()))) {
			t.Errorf("rawFloat(%s) = %v, %v; gjson says %v", raw, f, ok, g.Float())
		}
		if n := rawLooseInt(raw); n != g.Int() {
			t.Errorf("rawLooseInt(%s) = %d; gjson says %d", raw, n, g.Int())
		}
	}
	for _, tt := range []struct {
		raw string
		n   int64
		ok  bool
	}{
		{"12", 12, true}, {"0", 0, true}, {"-1", 0, false}, {"1.7", 1, true},
		{`"12"`, 0, false}, {"null", 0, false}, {"", 0, false},
	} {
		if n, ok := rawCount(tt.raw); n != tt.n || ok != tt.ok {
			t.Errorf("rawCount(%q) = %d, %v; want %d, %v", tt.raw, n, ok, tt.n, tt.ok)
		}
	}
}

// TestRawReaderAllocations: reading, escapes and all, allocates nothing,
// decoding included while the value fits in a rawBuf.
func TestRawReaderAllocations(t *testing.T) {
	obj := `{"id":"a\"b","model":"meta-llama\/Llama-3.1-8B-Instruct","choices":[{"delta":{"content":"line\nbreak \"q\" caf\u00e9"}}],"n":12,"s":"\u0031"}`
	var sink int64
	allocs := testing.AllocsPerRun(100, func() {
		rawMembers(obj, func(k, v string) bool {
			var b rawBuf
			if s, ok := rawStr(v, b[:0]); ok {
				sink += int64(len(s))
			}
			rawElements(v, func(e string) bool {
				t, _ := rawText(rawMember(rawMember(e, "delta"), "content"))
				sink += int64(len(t))
				return true
			})
			n, _ := rawInt(v)
			sink += n + rawLooseInt(v)
			return true
		})
	})
	if allocs != 0 {
		t.Errorf("%v allocations, want 0", allocs)
	}
	if sink == 0 {
		t.Error("nothing read")
	}
}

// FuzzJSONRaw: whatever the input, the raw reader does not panic and hands
// out only non-empty pieces of its input; on valid JSON it agrees with
// encoding/json about the members of every object and the elements of
// every array, all the way down, and about the value of every string.
func FuzzJSONRaw(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":"x","c":true,"d":null,"e":[1,{"f":"g"}],"h":{}}`,
		`{"t":"a\"}{[\\","u":{"v":"}"}}`,
		`{"choices":[{"index":0,"delta":{"content":"line\nbreak \"q\" caf\u00e9 \ud83d\ude00"}}]}`,
		`{"tool_calls":[{"function":{"arguments":"{\"city\":"}}]}`,
		`{"a\"b":1,"caf\u00e9":2,"":3,"a":4,"a":5}`,
		`[1, -2.5e3, "a,]", {"b":[2]}, [3,[4,[5]]], null, true, false]`,
		`{"a":{"b":1}`, `{"a":"oops`, `{"a" 1}`, `{"a":}`, `[1,,2]`, `"\ud83d"`, `"\u12"`,
		" {\n \"a\" :\t1 ,\r\n\"b\": [1, 2] }  ",
	} {
		f.Add([]byte(s))
	}
	// Every JSON payload of the SSE and NDJSON fixtures.
	files, _ := filepath.Glob(filepath.Join("testdata", "*", "*"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil || filepath.Ext(name) == ".bin" {
			continue
		}
		for line := range bytes.Lines(b) {
			line = bytes.TrimSpace(bytes.TrimPrefix(line, []byte("data:")))
			if len(line) > 0 && (line[0] == '{' || line[0] == '[') {
				f.Add(line)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := string(data)
		checkRawValue(t, s, s, 0)
		if json.Valid(data) {
			agreeWithEncodingJSON(t, strings.TrimSpace(s), 0)
		}
	})
}

// checkRawValue walks v with every function of the raw reader: none may
// panic, and every piece handed out must be a non-empty substring of in.
func checkRawValue(t *testing.T, in, v string, depth int) {
	t.Helper()
	if depth > 20 {
		return
	}
	within := func(what, p string) {
		if p == "" {
			t.Fatalf("empty %s handed out from %q", what, v)
		}
		if !strings.Contains(in, p) {
			t.Fatalf("%s %q is not part of the input", what, p)
		}
	}
	var members []string
	rawMembers(v, func(k, val string) bool {
		members = append(members, k+"="+val)
		return true
	})
	if walked, _ := walkedMembers(v); !reflect.DeepEqual(walked, members) {
		t.Fatalf("%q: rawWalkMembers, descending, handed out %q, rawMembers %q", v, walked, members)
	}
	if walked, _ := walkedMembers(v); len(walked) > 0 {
		checkResume(t, v, walked)
	}
	rawMembers(v, func(k, val string) bool {
		within("value", val)
		if rawMember(v, k) == "" {
			t.Fatalf("rawMember(%q) missed a key rawMembers found", k)
		}
		checkRawValue(t, in, val, depth+1)
		return true
	})
	rawElements(v, func(e string) bool {
		within("element", e)
		checkRawValue(t, in, e, depth+1)
		return true
	})
	rawLen(v)
	rawKindOf(v)
	rawInt(v)
	rawFloat(v)
	rawLooseInt(v)
	rawCount(v)
	if text, ok := rawText(v); ok {
		var b rawBuf
		dec, _ := rawStr(v, b[:0])
		if !strings.Contains(text, `\`) && string(dec) != text {
			t.Fatalf("rawStr(%q) = %q changed a string without escapes", v, dec)
		}
	}
	// Decoding arbitrary bytes, not only the strings the reader finds.
	rawUnescape(nil, v)
}

// agreeWithEncodingJSON checks the raw reader against encoding/json on v, a
// valid JSON value without surrounding space, and recursively on what is
// inside it.
func agreeWithEncodingJSON(t *testing.T, v string, depth int) {
	t.Helper()
	if depth > 20 {
		return
	}
	dec := json.NewDecoder(strings.NewReader(v))
	dec.UseNumber()
	var want any
	if err := dec.Decode(&want); err != nil {
		t.Fatalf("encoding/json cannot read %q, which json.Valid accepted: %v", v, err)
	}
	switch w := want.(type) {
	case map[string]any:
		if k := rawKindOf(v); k != kindObject {
			t.Fatalf("rawKindOf(%q) = %d, want an object", v, k)
		}
		// Members in order, duplicates included, from the token stream.
		type member struct{ key, val string }
		var wantMembers, got []member
		dec := json.NewDecoder(strings.NewReader(v))
		dec.Token() // {
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				t.Fatal(err)
			}
			wantMembers = append(wantMembers, member{k.(string), string(bytes.TrimSpace(raw))})
		}
		rawMembers(v, func(k, val string) bool {
			var b rawBuf
			key, _ := rawStr(`"`+k+`"`, b[:0])
			got = append(got, member{string(key), val})
			return true
		})
		if len(got) != len(wantMembers) {
			t.Fatalf("%q: members %q, encoding/json says %q", v, got, wantMembers)
		}
		for i := range got {
			if got[i].val != wantMembers[i].val {
				t.Fatalf("%q: member %d value %q, encoding/json says %q", v, i, got[i].val, wantMembers[i].val)
			}
			// encoding/json replaces invalid UTF-8 with U+FFFD; the raw
			// reader keeps bytes as they are.
			if utf8.ValidString(got[i].key) && got[i].key != wantMembers[i].key {
				t.Fatalf("%q: member %d key %q, encoding/json says %q", v, i, got[i].key, wantMembers[i].key)
			}
			agreeWithEncodingJSON(t, got[i].val, depth+1)
		}
	case []any:
		if k := rawKindOf(v); k != kindArray {
			t.Fatalf("rawKindOf(%q) = %d, want an array", v, k)
		}
		var wantElems, got []string
		dec := json.NewDecoder(strings.NewReader(v))
		dec.Token() // [
		for dec.More() {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				t.Fatal(err)
			}
			wantElems = append(wantElems, string(bytes.TrimSpace(raw)))
		}
		rawElements(v, func(e string) bool {
			got = append(got, e)
			return true
		})
		if !reflect.DeepEqual(got, wantElems) {
			t.Fatalf("%q: elements %q, encoding/json says %q", v, got, wantElems)
		}
		if n := rawLen(v); n != int64(len(w)) {
			t.Fatalf("rawLen(%q) = %d, want %d", v, n, len(w))
		}
		for _, e := range got {
			agreeWithEncodingJSON(t, e, depth+1)
		}
	case string:
		var b rawBuf
		got, ok := rawStr(v, b[:0])
		if !ok || rawKindOf(v) != kindString {
			t.Fatalf("rawStr(%q) is not a string", v)
		}
		if utf8.ValidString(v) && string(got) != w {
			t.Fatalf("rawStr(%q) = %q, encoding/json says %q", v, got, w)
		}
	case json.Number:
		f, ok := rawFloat(v)
		if !ok {
			t.Fatalf("rawFloat(%q) is not a number", v)
		}
		if want, err := w.Float64(); err == nil && f != want {
			t.Fatalf("rawFloat(%q) = %v, encoding/json says %v", v, f, want)
		}
	case bool:
		if k := rawKindOf(v); (w && k != kindTrue) || (!w && k != kindFalse) {
			t.Fatalf("rawKindOf(%q) = %d, want %v", v, k, w)
		}
	case nil:
		if k := rawKindOf(v); k != kindNull {
			t.Fatalf("rawKindOf(%q) = %d, want null", v, k)
		}
	}
}
