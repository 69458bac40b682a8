package injectusage

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/splitfeed"
)

// strip runs a Stripper over pieces, then Flush, as the proxy does, and
// returns what the client got and what the meter was given. Each piece is
// copied into one scratch buffer that is overwritten after its Strip, as a
// proxy reuses its buffer, so a Stripper that kept a reference to a write
// would give itself away.
func strip(pieces [][]byte, maxEvent int) (client, upstream []byte) {
	s := &Stripper{MaxEventSize: maxEvent}
	var scratch []byte
	for _, p := range pieces {
		scratch = append(scratch[:0], p...)
		c, u := s.Strip(scratch)
		client = append(client, c...)
		upstream = append(upstream, u...)
		for i := range scratch {
			scratch[i] = 'X'
		}
	}
	rest := s.Flush()
	client = append(client, rest...)
	upstream = append(upstream, rest...)
	return client, upstream
}

// checkStrip checks a stream in one write, cut at every single point, and
// byte by byte: the client gets want each time, and the meter the stream.
func checkStrip(t *testing.T, in, want []byte) {
	t.Helper()
	check := func(how string, pieces [][]byte) {
		t.Helper()
		client, upstream := strip(pieces, 0)
		if !bytes.Equal(client, want) {
			t.Fatalf("%s: client got\n%q\nwant\n%q", how, client, want)
		}
		if !bytes.Equal(upstream, in) {
			t.Fatalf("%s: meter got\n%q\nwant the stream as sent", how, upstream)
		}
	}
	check("whole", [][]byte{in})
	for c, pieces := range splitfeed.Cuts(in) {
		check("cut at "+strconv.Itoa(c), pieces)
	}
	check("byte by byte", splitfeed.Bytewise(in))
}

const (
	role   = `data: {"id":"a","choices":[{"delta":{"role":"assistant"}}],"usage":null}`
	roleW  = `data: {"id":"a","choices":[{"delta":{"role":"assistant"}}]}`
	text   = `data: {"id":"a","choices":[{"delta":{"content":"Hi"}}],"usage":null,"obfuscation":"x"}`
	textW  = `data: {"id":"a","choices":[{"delta":{"content":"Hi"}}],"obfuscation":"x"}`
	usage  = `data: {"id":"a","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`
	done   = `data: [DONE]`
	plain1 = `data: {"id":"a","choices":[{"delta":{"content":"Hi"}}]}`
)

// stream joins lines with a line end, each event followed by a blank line.
func stream(end string, events ...string) string {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(strings.ReplaceAll(e, "\n", end))
		b.WriteString(end + end)
	}
	return b.String()
}

func TestStripper(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"LF", stream("\n", role, text, usage, done), stream("\n", roleW, textW, done)},
		{"CRLF", stream("\r\n", role, text, usage, done), stream("\r\n", roleW, textW, done)},
		// The scan before sse.Splitter looked for "\n\n" and "\r\n\r\n"
		// only: it found no end here, held the whole stream, and let it
		// go unedited at the end.
		{"bare CR", stream("\r", role, text, usage, done), stream("\r", roleW, textW, done)},
		{"mixed line ends", role + "\r\n\n" + text + "\n\r" + usage + "\r\r\n" + done + "\n\n",
			roleW + "\r\n\n" + textW + "\n\r" + done + "\n\n"},
		{"keep-alive comments pass", ": keep-alive\n\n" + stream("\n", role) + ": ping\n\n" + stream("\n", usage),
			": keep-alive\n\n" + stream("\n", roleW) + ": ping\n\n"},
		{"an event with a comment line is not edited", ": ping\n" + stream("\n", text), ": ping\n" + stream("\n", text)},
		{"multi-line data is not edited", stream("\n", "data: {\"usage\":null,\ndata: \"a\":1}"), stream("\n", "data: {\"usage\":null,\ndata: \"a\":1}")},
		{"an event field is not edited", stream("\n", "event: x\n"+text), stream("\n", "event: x\n"+text)},
		{"stray blank lines pass", "\n\r\n" + stream("\n", text) + "\r", "\n\r\n" + stream("\n", textW) + "\r"},
		{"usage on a chunk with choices is kept", stream("\n", `data: {"choices":[{"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}`),
			stream("\n", `data: {"choices":[{"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}`)},
		{"no injected parts: untouched", stream("\n", plain1, plain1, done), stream("\n", plain1, plain1, done)},
		{"a BOM stays, the first event is edited", "\xEF\xBB\xBF" + stream("\n", role, usage), "\xEF\xBB\xBF" + stream("\n", roleW)},
		{"a truncated event passes as it came", stream("\n", text) + `data: {"usage":null,"choices":[{"de`,
			stream("\n", textW) + `data: {"usage":null,"choices":[{"de`},
		{"a last event without its blank line passes as it came", stream("\n", text) + text + "\n",
			stream("\n", textW) + text + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkStrip(t, []byte(tt.in), []byte(tt.want))
		})
	}
}

func TestStripEvent(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"usage null last", "data: {\"id\":\"a\",\"choices\":[{\"delta\":{\"content\":\"x\"}}],\"usage\":null}\n\n",
			"data: {\"id\":\"a\",\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n"},
		{"usage null first", "data: {\"usage\":null,\"id\":\"a\"}\n\n", "data: {\"id\":\"a\"}\n\n"},
		{"usage null alone", "data: {\"usage\":null}\n\n", "data: {}\n\n"},
		{"usage null middle with spaces", "data: {\"id\":\"a\", \"usage\" : null , \"obfuscation\":\"zz\"}\r\n\r\n",
			"data: {\"id\":\"a\" , \"obfuscation\":\"zz\"}\r\n\r\n"},
		{"no space after data:", "data:{\"id\":\"a\",\"usage\":null}\n\n", "data:{\"id\":\"a\"}\n\n"},
		{"usage-only chunk removed", "data: {\"id\":\"a\",\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\n\n", ""},
		{"usage-only chunk with spaces removed", "data: {\"choices\": [ ], \"usage\": {}}\r\r", ""},
		{"usage on a chunk with choices is kept", "data: {\"choices\":[{\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1}}\n\n",
			"data: {\"choices\":[{\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1}}\n\n"},
		{"usage object without choices is kept", "data: {\"usage\":{\"prompt_tokens\":1}}\n\n", "data: {\"usage\":{\"prompt_tokens\":1}}\n\n"},
		{"usage with a value is kept", "data: {\"usage\":0}\n\n", "data: {\"usage\":0}\n\n"},
		{"nested usage null untouched", "data: {\"x\":{\"usage\":null}}\n\n", "data: {\"x\":{\"usage\":null}}\n\n"},
		{"[DONE] untouched", "data: [DONE]\n\n", "data: [DONE]\n\n"},
		{"comment untouched", ": keep-alive\n\n", ": keep-alive\n\n"},
		{"empty data untouched", "data:\n\n", "data:\n\n"},
		{"lone LF untouched", "\n", "\n"},
		{"multi-line data untouched", "data: {\"usage\":null,\ndata: \"a\":1}\n\n", "data: {\"usage\":null,\ndata: \"a\":1}\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(appendClientEvent(nil, []byte(tt.in))); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// withoutInjected is what OpenAI sends a client that did not ask for usage,
// derived from the stream with usage by plain text edits: no usage-only
// chunk, no "usage":null.
func withoutInjected(t *testing.T, in []byte, end string) []byte {
	t.Helper()
	out := bytes.ReplaceAll(in, []byte(`,"usage":null`), nil)
	i := bytes.Index(out, []byte(`"choices":[],"usage":{`))
	if i < 0 {
		t.Fatal("no usage-only chunk in the fixture")
	}
	sep := []byte(end + end)
	start := bytes.LastIndex(out[:i], sep) + len(sep)
	stop := i + bytes.Index(out[i:], sep) + len(sep)
	out = slices.Concat(out[:start], out[stop:])
	if bytes.Contains(out, []byte("usage")) {
		t.Fatalf("usage left in the reference:\n%s", out)
	}
	return out
}

// TestStripperRecordedStream: a stream as OpenAI sends it with include_usage,
// in each of the three line ends, comes out as OpenAI sends it without.
func TestStripperRecordedStream(t *testing.T) {
	lf, err := os.ReadFile(filepath.Join("testdata", "chat_usage.sse"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, end string }{{"LF", "\n"}, {"CRLF", "\r\n"}, {"bare CR", "\r"}} {
		t.Run(tt.name, func(t *testing.T) {
			in := bytes.ReplaceAll(lf, []byte("\n"), []byte(tt.end))
			checkStrip(t, in, withoutInjected(t, in, tt.end))
		})
	}
}

// TestStripperSendsEventsAtOnce: an event goes to the client with the write
// that ends it, a bare CR included, and only the partial event is held.
func TestStripperSendsEventsAtOnce(t *testing.T) {
	var s Stripper
	writes := []struct{ in, client string }{
		{role + "\n\n" + `data: {"id":"a","ch`, roleW + "\n\n"},
		{`oices":[{"delta":{"content":"Hi"}}],"usage":null,"obfuscation":"x"}` + "\r", ""},
		{"\r", textW + "\r\r"},
		{"\n" + usage + "\r\r", "\n"},
		{done + "\r", ""},
	}
	for i, w := range writes {
		if client, _ := s.Strip([]byte(w.in)); string(client) != w.client {
			t.Fatalf("write %d: client got %q, want %q", i, client, w.client)
		}
	}
	if rest := s.Flush(); string(rest) != done+"\r" {
		t.Fatalf("Flush gave %q", rest)
	}
	if rest := s.Flush(); len(rest) != 0 {
		t.Fatalf("a second Flush gave %q", rest)
	}
}

// TestStripperPassthrough: a stream with no event end within the cap is not
// one the stripper can edit: from then on every byte passes as it came,
// and the events it completed before are still edited.
func TestStripperPassthrough(t *testing.T) {
	long := "data: " + strings.Repeat("x", 100)
	tests := []struct {
		name   string
		pieces []string
		want   string
		pass   bool
	}{
		{"no event end at all", []string{long[:50], long[50:], "\n\n" + text + "\n\n"}, long + "\n\n" + text + "\n\n", true},
		{"events before an endless one", []string{role + "\n\n" + long, "\n\n" + text + "\n\n"}, roleW + "\n\n" + long + "\n\n" + text + "\n\n", true},
		{"within the cap", []string{text[:40], text[40:] + "\n\n"}, textW + "\n\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Stripper{MaxEventSize: 96}
			var client, upstream, in []byte
			for _, p := range tt.pieces {
				c, u := s.Strip([]byte(p))
				client, upstream, in = append(client, c...), append(upstream, u...), append(in, p...)
			}
			rest := s.Flush()
			client, upstream = append(client, rest...), append(upstream, rest...)
			if string(client) != tt.want {
				t.Errorf("client got\n%q\nwant\n%q", client, tt.want)
			}
			if !bytes.Equal(upstream, in) {
				t.Errorf("meter got %q", upstream)
			}
			if s.Passthrough() != tt.pass {
				t.Errorf("Passthrough() = %v", s.Passthrough())
			}
		})
	}
}

// TestStripperAllocs: once its buffers have grown, a Stripper allocates
// nothing, in any write size, whatever the line ends.
func TestStripperAllocs(t *testing.T) {
	lf, err := os.ReadFile(filepath.Join("testdata", "chat_usage.sse"))
	if err != nil {
		t.Fatal(err)
	}
	for _, end := range []string{"\n", "\r\n", "\r"} {
		in := bytes.ReplaceAll(lf, []byte("\n"), []byte(end))
		for _, size := range []int{1, 7, 64, 4096} {
			writes := splitfeed.Sized(in, size)
			var s Stripper
			var sink int
			run := func() {
				for _, w := range writes {
					c, u := s.Strip(w)
					sink += len(c) + len(u)
				}
				sink += len(s.Flush())
			}
			run()
			if a := testing.AllocsPerRun(50, run); a != 0 {
				t.Errorf("line end %q, %d-byte writes: %v allocs per stream, want 0", end, size, a)
			}
		}
	}
}
