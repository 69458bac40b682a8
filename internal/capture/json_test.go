package capture

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func textMsg(role string, texts ...string) Message {
	m := Message{Role: role, Parts: []Part{}}
	for _, t := range texts {
		m.Parts = append(m.Parts, Part{Type: typeText, Content: []byte(t)})
	}
	return m
}

// TestEncodeMessagesTruncation pins how content is cut to fit: nothing when
// it fits; else the longest contents first, to a common length, each cut
// marked with …; arguments that no longer fit whole become a string; and
// only when the shape alone is too big, the oldest messages (then the
// oldest parts) are left out.
func TestEncodeMessagesTruncation(t *testing.T) {
	long := strings.Repeat("a", 200)
	tests := []struct {
		name string
		msgs []Message
		max  int
		want Result
	}{
		{
			name: "fits: unchanged",
			msgs: []Message{textMsg("user", "hi")},
			max:  1000,
			want: Result{JSON: `[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`},
		},
		{
			name: "exactly fits",
			msgs: []Message{textMsg("user", "hi")},
			max:  len(`[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`),
			want: Result{JSON: `[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`},
		},
		{
			name: "the long content is cut, the short one stays whole",
			msgs: []Message{textMsg("system", "Be brief."), textMsg("user", long)},
			max:  150,
			want: Result{JSON: `[{"role":"system","parts":[{"type":"text","content":"Be brief."}]},{"role":"user","parts":[{"type":"text","content":"` +
				strings.Repeat("a", 150-len(`[{"role":"system","parts":[{"type":"text","content":"Be brief."}]},{"role":"user","parts":[{"type":"text","content":""}]}]`)-len("…")) +
				`…"}]}]`, Truncated: true},
		},
		{
			name: "two long contents are cut to the same length",
			msgs: []Message{textMsg("user", long, strings.Repeat("b", 300))},
			max:  100,
			want: Result{JSON: `[{"role":"user","parts":[{"type":"text","content":"aaaa…"},{"type":"text","content":"bbbb…"}]}]`, Truncated: true},
		},
		{
			name: "arguments too long to stay JSON become a cut string",
			msgs: []Message{{Role: "assistant", Parts: []Part{{Type: typeToolCall, ID: "c1", Name: "f", Args: []byte(`{"q":"` + long + `"}`)}}}},
			max:  100,
			want: Result{JSON: `[{"role":"assistant","parts":[{"type":"tool_call","id":"c1","name":"f","arguments":"{\"q\":…"}]}]`, Truncated: true},
		},
		{
			name: "a cut never splits a character or an escape",
			msgs: []Message{textMsg("user", strings.Repeat("é\n", 50))},
			max:  66,
			want: Result{JSON: `[{"role":"user","parts":[{"type":"text","content":"é\né…"}]}]`, Truncated: true},
		},
		{
			name: "the shape does not fit: the oldest messages are left out",
			msgs: []Message{textMsg("user", "one"), textMsg("assistant", "two"), textMsg("user", "three")},
			max:  70,
			want: Result{JSON: `[{"role":"user","parts":[{"type":"text","content":"three"}]}]`, Truncated: true},
		},
		{
			name: "one message with too many parts: the oldest parts are left out",
			msgs: []Message{textMsg("user", "p1", "p2", "p3", "p4")},
			max:  100,
			want: Result{JSON: `[{"role":"user","parts":[{"type":"text","content":"p3"},{"type":"text","content":"p4"}]}]`, Truncated: true},
		},
		{
			name: "nothing fits",
			msgs: []Message{textMsg("a-role-whose-name-is-longer-than-the-bound", "x")},
			max:  20,
			want: Result{JSON: `[]`, Truncated: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := encodeMessages(tt.msgs, tt.max)
			checkResult(t, "messages", got, tt.want)
			if len(got.JSON) > tt.max {
				t.Errorf("%d bytes, over the bound of %d", len(got.JSON), tt.max)
			}
		})
	}
}

// TestEncodePartsTruncation: system instructions keep their first parts.
func TestEncodePartsTruncation(t *testing.T) {
	ps := []Part{{Type: typeText, Content: []byte("first")}, {Type: typeText, Content: []byte("second")}, {Type: typeText, Content: []byte("third")}}
	got := encodeParts(ps, 70)
	want := Result{JSON: `[{"type":"text","content":"first"},{"type":"text","content":"second"}]`, Truncated: true}
	checkResult(t, "parts", got, want)
	got = encodeParts(ps, 1000)
	checkResult(t, "parts", got, Result{JSON: `[{"type":"text","content":"first"},{"type":"text","content":"second"},{"type":"text","content":"third"}]`})
}

// randomText is text with what makes encoding and cutting hard: escapes,
// control characters, multi-byte characters, line separators.
func randomText(r *rand.Rand, n int) string {
	pieces := []string{"a", "word ", "\"", "\\", "\n", "\t", "\x01", "é", "日本", "🙂", "\u2028", "<&>"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func randomMessages(r *rand.Rand) []Message {
	msgs := make([]Message, 1+r.IntN(6))
	for i := range msgs {
		m := &msgs[i]
		m.Role = []string{"user", "assistant", "system", "tool"}[r.IntN(4)]
		m.Parts = []Part{}
		for range 1 + r.IntN(4) {
			switch r.IntN(4) {
			case 0, 1:
				m.Parts = append(m.Parts, Part{Type: typeText, Content: []byte(randomText(r, r.IntN(400)))})
			case 2:
				args, _ := json.Marshal(map[string]string{"q": randomText(r, r.IntN(300))})
				m.Parts = append(m.Parts, Part{Type: typeToolCall, ID: "call_" + randomText(r, 5), Name: "f", Args: args})
			case 3:
				m.Parts = append(m.Parts, Part{Type: typeToolCallResponse, ID: "call_1", Response: []byte(randomText(r, r.IntN(300)))})
			}
		}
	}
	return msgs
}

// contents lists the decoded content fields of decoded messages, in order,
// with each message's role, as JSON strings (arguments and responses
// written as JSON values are compared as their JSON text).
func contents(t *testing.T, js string) [][]string {
	t.Helper()
	var msgs []struct {
		Role  string
		Parts []map[string]json.RawMessage
	}
	if err := json.Unmarshal([]byte(js), &msgs); err != nil {
		t.Fatalf("%v: %s", err, js)
	}
	var out [][]string
	for _, m := range msgs {
		fields := []string{m.Role}
		for _, p := range m.Parts {
			for _, k := range []string{"content", "arguments", "response"} {
				raw, ok := p[k]
				if !ok {
					continue
				}
				var s string
				if json.Unmarshal(raw, &s) != nil {
					s = string(raw) // a JSON value written whole
				}
				fields = append(fields, s)
			}
		}
		out = append(out, fields)
	}
	return out
}

// TestEncodeMessagesBound checks on random conversations and bounds what
// truncation promises: the JSON is valid UTF-8 and valid JSON, never over
// the bound; a conversation that fits is written whole and unmarked; one
// that does not is marked, keeps the last messages in order, and each of
// their contents is whole or a prefix of itself followed by …; and the
// bound is used: what is cut leaves at most a few bytes per content unused.
func TestEncodeMessagesBound(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 3000 {
		msgs := randomMessages(r)
		max := MinMaxSize + r.IntN(3000)
		e := encoder{limit: whole}
		e.messages(msgs)
		full := string(e.buf)
		got := encodeMessages(msgs, max)
		if len(got.JSON) > max || !utf8.ValidString(got.JSON) || !json.Valid([]byte(got.JSON)) {
			t.Fatalf("case %d: invalid or over %d bytes (%d): %s", i, max, len(got.JSON), got.JSON)
		}
		if len(full) <= max {
			if got.JSON != full || got.Truncated {
				t.Fatalf("case %d: fits in %d but was changed", i, max)
			}
			continue
		}
		if !got.Truncated {
			t.Fatalf("case %d: cut but not marked", i)
		}
		orig, cut := contents(t, full), contents(t, got.JSON)
		if len(cut) == 0 {
			continue
		}
		orig = orig[len(orig)-len(cut):]
		for m := range cut {
			if cut[m][0] != orig[m][0] {
				t.Fatalf("case %d: message %d role %q, want %q", i, m, cut[m][0], orig[m][0])
			}
			// When a message lost parts, its remaining contents are the
			// last of the original's.
			o := orig[m][len(orig[m])-len(cut[m]):]
			for f := 1; f < len(cut[m]); f++ {
				c, w := cut[m][f], o[f]
				if c != w && !(strings.HasSuffix(c, ellipsis) && strings.HasPrefix(w, strings.TrimSuffix(c, ellipsis))) &&
					!(c == "" && w != "") {
					t.Fatalf("case %d: content %q is neither %q nor a marked prefix of it", i, c, w)
				}
			}
		}
		if len(cut) == len(contents(t, full)) && len(cut[0]) == len(contents(t, full)[0]) {
			fields := 0
			for _, m := range cut {
				fields += len(m) - 1
			}
			if len(got.JSON) < max-8*fields {
				t.Fatalf("case %d: %d bytes of %d used with %d contents", i, len(got.JSON), max, fields)
			}
		}
	}
}

// TestAppendString agrees with encoding/json on what a string decodes to,
// and with encodedLen and prefixLen on its length.
func TestAppendString(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		s := randomText(r, r.IntN(60))
		if r.IntN(4) == 0 {
			s += "\xff\xfe" + s // invalid UTF-8
		}
		enc := appendString(nil, s)
		if len(enc)-2 != encodedLen(s) {
			t.Fatalf("%q: encoded %d bytes, encodedLen says %d", s, len(enc)-2, encodedLen(s))
		}
		var back string
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if back != strings.ToValidUTF8(s, "\uFFFD") && back != validRunes(s) {
			t.Fatalf("%q decodes to %q", s, back)
		}
		budget := r.IntN(encodedLen(s) + 1)
		n := prefixLen(s, budget)
		if encodedLen(s[:n]) > budget || (n < len(s) && encodedLen(s[:n])+6 < budget) {
			t.Fatalf("%q: prefix %d for budget %d", s, n, budget)
		}
	}
}

// validRunes replaces each invalid byte of s with U+FFFD, as appendString
// does.
func validRunes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r)
		i += size
	}
	return b.String()
}
