package eventstream

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/splitfeed"
)

// rawMessage frames headers and payload by hand, with correct checksums, so
// tests can build messages AWS's encoder refuses to (malformed headers).
func rawMessage(headers, payload []byte) []byte {
	total := minLen + len(headers) + len(payload)
	b := binary.BigEndian.AppendUint32(nil, uint32(total))
	b = binary.BigEndian.AppendUint32(b, uint32(len(headers)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	b = append(b, headers...)
	b = append(b, payload...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// prelude is a prelude with a correct checksum claiming the given lengths.
func prelude(total, headers uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, total)
	b = binary.BigEndian.AppendUint32(b, headers)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// strHeader encodes one string header.
func strHeader(name, value string) []byte {
	b := append([]byte{byte(len(name))}, name...)
	b = append(b, typeString)
	b = binary.BigEndian.AppendUint16(b, uint16(len(value)))
	return append(b, value...)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x20
	return c
}

// workedExample is the ConverseStream frame of wire-formats.md §8.1, built
// by hand with zlib.crc32 for that note: bytes from outside this code base.
const workedExample = "0000009f00000057c37babff0b3a6576656e742d747970650700116" +
	"36f6e74656e74426c6f636b44656c74610d3a636f6e74656e742d747970650700106170" +
	"706c69636174696f6e2f6a736f6e0d3a6d6573736167652d7479706507000565766" +
	"56e747b22636f6e74656e74426c6f636b496e646578223a302c2264656c7461223a7b22" +
	"74657874223a224869227d2c2270223a2261626364227df2ace5ff"

func TestDecoderCases(t *testing.T) {
	example, err := hex.DecodeString(workedExample)
	if err != nil || len(example) != 159 {
		t.Fatalf("worked example: %v, %d bytes", err, len(example))
	}
	ok := rawMessage(strHeader(":event-type", "ok"), []byte(`{}`))
	okRec := rec{EventType: "ok", Payload: "{}"}
	big := rawMessage(strHeader(":event-type", "big"), bytes.Repeat([]byte("x"), 100))
	tests := []struct {
		name  string
		in    []byte
		max   int
		want  []rec
		stats Stats // Bytes is filled in
	}{
		{
			name: "wire-formats worked example, hand-built", in: example,
			want:  []rec{{MessageType: "event", EventType: "contentBlockDelta", ContentType: "application/json", Payload: `{"contentBlockIndex":0,"delta":{"text":"Hi"},"p":"abcd"}`}},
			stats: Stats{Messages: 1},
		},
		{
			name: "messages back to back", in: cat(ok, example, ok),
			want:  []rec{okRec, {MessageType: "event", EventType: "contentBlockDelta", ContentType: "application/json", Payload: `{"contentBlockIndex":0,"delta":{"text":"Hi"},"p":"abcd"}`}, okRec},
			stats: Stats{Messages: 3},
		},
		{
			name: "bad prelude checksum stops the stream", in: cat(ok, flip(ok, 9), ok),
			want: []rec{okRec}, stats: Stats{Messages: 1, Errors: 1},
		},
		{
			name: "bad message checksum stops the stream", in: cat(ok, flip(ok, len(ok)-6), ok),
			want: []rec{okRec}, stats: Stats{Messages: 1, Errors: 1},
		},
		{
			name: "a text body is not an event stream", in: []byte("<html><body>502 Bad Gateway</body></html>\n"),
			stats: Stats{Errors: 1},
		},
		{
			name: "total length below the 16-byte minimum", in: cat(ok, prelude(15, 0), []byte("abcd"), ok),
			want: []rec{okRec}, stats: Stats{Messages: 1, Errors: 1},
		},
		{
			name: "headers length past the end of the message", in: cat(prelude(20, 5), []byte("12345678")),
			stats: Stats{Errors: 1},
		},
		{
			name: "headers length over the 128 KiB limit", in: cat(prelude(200<<10, 129<<10), []byte("1234")),
			stats: Stats{Errors: 1},
		},
		{
			name: "payload over the 24 MiB limit", in: cat(prelude(25<<20, 0), []byte("1234")),
			stats: Stats{Errors: 1},
		},
		{
			name: "unknown header type", in: cat(ok, rawMessage([]byte("\x01x\x0a"), nil), ok),
			want: []rec{okRec}, stats: Stats{Messages: 1, Errors: 1},
		},
		{
			name: "string header longer than its block", in: rawMessage([]byte("\x01x\x07\x00\x09abc"), nil),
			stats: Stats{Errors: 1},
		},
		{
			name: "uuid header cut short", in: rawMessage([]byte("\x01u\x09abcdefgh"), nil),
			stats: Stats{Errors: 1},
		},
		{
			name: "header type missing", in: rawMessage([]byte("\x01x"), nil),
			stats: Stats{Errors: 1},
		},
		{
			name: "a lone name length closing the headers is ignored, as AWS's decoder does",
			in:   rawMessage(cat(strHeader(":event-type", "e"), []byte{5}), []byte("p")),
			want: []rec{{EventType: "e", Payload: "p"}}, stats: Stats{Messages: 1},
		},
		{
			name: "an empty header name is a name",
			in:   rawMessage(cat([]byte("\x00\x00"), strHeader(":event-type", "e")), nil),
			want: []rec{{EventType: "e"}}, stats: Stats{Messages: 1},
		},
		{
			name: "a repeated header keeps its last value",
			in:   rawMessage(cat(strHeader(":event-type", "first"), strHeader(":event-type", "last")), nil),
			want: []rec{{EventType: "last"}}, stats: Stats{Messages: 1},
		},
		{
			name: "oversized message is skipped and decoding goes on", in: cat(ok, big, ok), max: 100,
			want: []rec{okRec, okRec}, stats: Stats{Messages: 2, Oversized: 1},
		},
		{
			name: "oversized message with a bad checksum stops the stream", in: cat(ok, flip(big, 50), ok), max: 100,
			want: []rec{okRec}, stats: Stats{Messages: 1, Errors: 1},
		},
		{
			name: "cap below the minimum skips even empty messages", in: cat(rawMessage(nil, nil), ok), max: 10,
			stats: Stats{Oversized: 2},
		},
		{
			name: "message at exactly the cap is read", in: ok, max: len(ok),
			want: []rec{okRec}, stats: Stats{Messages: 1},
		},
		{
			name: "message cut short at the end is dropped, not an error", in: cat(ok, ok[:len(ok)-1]),
			want: []rec{okRec}, stats: Stats{Messages: 1},
		},
		{
			name: "prelude cut short at the end", in: cat(ok, ok[:5]),
			want: []rec{okRec}, stats: Stats{Messages: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.stats.Bytes = int64(len(tt.in))
			for c, pieces := range splitfeed.Cuts(tt.in) {
				got, st := decodeChunks(pieces, tt.max)
				if !equalRecs(got, tt.want) || st != tt.stats {
					t.Fatalf("cut at %d:\n got %+v %+v\nwant %+v %+v", c, got, st, tt.want, tt.stats)
				}
			}
			if got, st := decodeChunks(splitfeed.Bytewise(tt.in), tt.max); !equalRecs(got, tt.want) || st != tt.stats {
				t.Fatalf("byte by byte:\n got %+v %+v\nwant %+v %+v", got, st, tt.want, tt.stats)
			}
		})
	}
}

// TestFixtures checks every fixture against AWS's decoder, whole, at every
// split point, byte by byte and in random pieces.
func TestFixtures(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for name, b := range loadFixtures(t) {
		t.Run(name, func(t *testing.T) {
			want, clean := awsDecode(b)
			if !clean {
				t.Fatal("AWS decoder rejects the fixture")
			}
			for c := 0; c <= len(b); c++ {
				checkAgainstAWS(t, b, c)
			}
			if got, st := decodeChunks(splitfeed.Bytewise(b), 0); !equalRecs(got, want) || st.Errors != 0 {
				t.Fatalf("byte by byte: %+v %+v", got, st)
			}
			for range 20 {
				if got, _ := decodeChunks(splitfeed.Random(r, b), 0); !equalRecs(got, want) {
					t.Fatalf("random pieces: %+v", got)
				}
			}
		})
	}
}

func TestFixtureContents(t *testing.T) {
	fx := loadFixtures(t)
	tests := []struct {
		file  string
		index int
		want  rec
	}{
		{"all_header_types.bin", 0, rec{MessageType: "event", EventType: "allTypes", Payload: `{"k":"v"}`}},
		{"all_header_types.bin", 1, rec{}},
		{"all_header_types.bin", 2, rec{Payload: "payload without headers"}},
		{"exception.bin", 1, rec{MessageType: "exception", ExceptionType: "throttlingException", ContentType: "application/json", Payload: `{"message":"Too many tokens, please wait before trying again."}`}},
		{"unmodelled_error.bin", 0, rec{MessageType: "error", ErrorCode: "InternalFailure", ErrorMessage: "An internal error occurred."}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, st := decodeChunks([][]byte{fx[tt.file]}, 0)
			if st.Errors != 0 || tt.index >= len(got) || got[tt.index] != tt.want {
				t.Fatalf("got %+v %+v, want [%d] = %+v", got, st, tt.index, tt.want)
			}
		})
	}
}

// TestHeadersAndPayloadViews: the raw header block and the payload are the
// message's own bytes.
func TestHeadersAndPayloadViews(t *testing.T) {
	h := strHeader(":event-type", "e")
	msg := rawMessage(h, []byte("body"))
	var headers, payload string
	d := &Decoder{OnMessage: func(m *Message) { headers, payload = string(m.Headers), string(m.Payload) }}
	d.Write(msg)
	if headers != string(h) || payload != "body" {
		t.Errorf("headers %q payload %q", headers, payload)
	}
}

func TestWriteDoesNotRetainBuffer(t *testing.T) {
	msg := rawMessage(strHeader(":event-type", "e"), []byte("payload"))
	var got []rec
	d := &Decoder{OnMessage: func(m *Message) { got = append(got, recOf(m)) }}
	buf := bytes.Clone(msg[:20])
	d.Write(buf)
	copy(buf, strings.Repeat("X", len(buf)))
	d.Write(msg[20:])
	if len(got) != 1 || got[0] != (rec{EventType: "e", Payload: "payload"}) {
		t.Errorf("got %+v", got)
	}
}

func TestCloseAndReset(t *testing.T) {
	msg := rawMessage(strHeader(":event-type", "e"), nil)
	d := &Decoder{}
	d.Write(msg[:7])
	d.Close()
	// After Close the next bytes start a new message: the partial one is
	// gone.
	d.Write(msg)
	if st := d.Stats(); st.Messages != 1 || st.Errors != 0 {
		t.Errorf("after Close: %+v", st)
	}
	d.Write([]byte("garbage garbage"))
	d.Close()
	d.Write(msg)
	if st := d.Stats(); st.Messages != 1 || st.Errors != 1 {
		t.Errorf("a broken stream stays broken until Reset: %+v", st)
	}
	d.Reset()
	d.Write(msg)
	if st := d.Stats(); st != (Stats{Messages: 1, Bytes: int64(len(msg))}) {
		t.Errorf("after Reset: %+v", st)
	}
}

func TestResetShrinksHugeBuffers(t *testing.T) {
	msg := rawMessage(nil, make([]byte, shrinkAbove*2))
	d := &Decoder{}
	d.Write(msg[:10])
	d.Write(msg[10:])
	if d.Stats().Messages != 1 {
		t.Fatal("large message not read")
	}
	d.Reset()
	if cap(d.buf) > shrinkAbove {
		t.Errorf("kept %d bytes of buffer", cap(d.buf))
	}
}

// TestOversizeNeverBuffered: a message over the cap streams past without
// growing the buffer, however it is split.
func TestOversizeNeverBuffered(t *testing.T) {
	msg := rawMessage(strHeader(":event-type", "e"), make([]byte, 1<<20))
	d := &Decoder{MaxMessageSize: 1024}
	for _, w := range splitfeed.Sized(msg, 1000) {
		d.Write(w)
	}
	if st := d.Stats(); st.Oversized != 1 || st.Errors != 0 || cap(d.buf) > 1024 {
		t.Errorf("stats %+v, buffer %d", st, cap(d.buf))
	}
}

func TestNilOnMessage(t *testing.T) {
	d := &Decoder{}
	d.Write(loadFixtures(t)["converse_stream.bin"])
	if d.Stats().Messages != 6 {
		t.Errorf("stats %+v", d.Stats())
	}
}

// TestZeroAllocs: once warm, decoding allocates nothing, however the stream
// is split.
func TestZeroAllocs(t *testing.T) {
	b := loadFixtures(t)["converse_stream.bin"]
	var n int
	d := &Decoder{OnMessage: func(m *Message) { n += len(m.Payload) }}
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
