package meter

import (
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokentap/tokentap/internal/framing/eventstream"
)

// bedrockFrame frames payload as an event of the given type, checksums and
// all, so the fuzzer's bytes reach the dialect instead of failing a CRC.
func bedrockFrame(eventType string, payload []byte) []byte {
	var h []byte
	for _, kv := range [][2]string{{":event-type", eventType}, {":message-type", "event"}} {
		h = append(h, byte(len(kv[0])))
		h = append(h, kv[0]...)
		h = append(h, 7)
		h = binary.BigEndian.AppendUint16(h, uint16(len(kv[1])))
		h = append(h, kv[1]...)
	}
	b := binary.BigEndian.AppendUint32(nil, uint32(16+len(h)+len(payload)))
	b = binary.BigEndian.AppendUint32(b, uint32(len(h)))
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	b = append(append(b, h...), payload...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// FuzzBedrock feeds arbitrary bytes to both Bedrock dialects: as an event
// stream, as a body, and as the payload of well-formed messages of every
// event type (for invoke, also base64-wrapped in a chunk). Whatever the
// input, reading it must not panic, and cutting the stream at any point
// must not change what is measured.
//
// The seeds are every fixture and every Bedrock recording (its .headers
// files aside), InvokeModel's of each family among them; the header
// fallback is fuzzed too, with data as the count headers' values.
func FuzzBedrock(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "bedrock", "*"))
	recorded, _ := filepath.Glob(filepath.Join("testdata", "recorded", "bedrock", "*"))
	for _, name := range append(files, recorded...) {
		if filepath.Ext(name) == ".headers" {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		invoke := filepath.Base(name)[:6] == "invoke"
		f.Add(b, uint16(0), invoke)
		// A recording is long: it seeds as a whole, and with the payloads
		// of its first messages and its last (the usage and the end), so
		// that the fuzzer's baseline stays within CI's fuzzing time.
		frames := bedrockFrames(b)
		wanted := func(i int) bool { return i < 6 || i == len(frames)-1 }
		if !strings.Contains(name, "recorded") {
			// Every message boundary and its neighbours: the unit test
			// already covers every split point without the fuzzer's
			// overhead.
			off := 0
			for _, fr := range frames {
				off += len(fr)
				for _, c := range []int{off - 1, off, off + 1} {
					if c >= 0 && c <= len(b) {
						f.Add(b, uint16(c), invoke)
					}
				}
			}
			wanted = func(int) bool { return true }
		}
		// Each message's payload alone, and for chunks its native JSON,
		// to seed the payload paths below.
		i := 0
		d := eventstream.Decoder{OnMessage: func(m *eventstream.Message) {
			if wanted(i) {
				f.Add(append([]byte(nil), m.Payload...), uint16(len(m.Payload)/2), invoke)
				if native, err := base64.StdEncoding.DecodeString(gjson.GetBytes(m.Payload, "bytes").Str); invoke && err == nil {
					f.Add(native, uint16(0), true)
				}
			}
			i++
		}}
		d.Write(b)
	}
	f.Fuzz(func(t *testing.T, data []byte, cut uint16, invoke bool) {
		path := bedrockConversePath
		if invoke {
			path = bedrockInvokePath
		}
		run := func(contentType string, stream []byte, c int) Measurement {
			mt := New(DetectDialect(path).New(), Options{MaxEventSize: 4096}, t0)
			mt.Request(path, data, false)
			mt.Response(200, contentType, "")
			mt.Write(stream[:c], t0.Add(step))
			mt.Write(stream[c:], t0.Add(step))
			return *mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
		}
		check := func(what string, stream []byte) {
			c := int(cut) % (len(stream) + 1)
			whole := run(bedrockMediaType, stream, len(stream))
			split := run(bedrockMediaType, stream, c)
			if !reflect.DeepEqual(whole, split) {
				t.Fatalf("%s: cut at %d changed the measurement:\nwhole %+v\nsplit %+v", what, c, whole, split)
			}
			if whole.Usage.OutputTokens < -1 || whole.Chunks < 0 || whole.Degraded < 0 {
				t.Fatalf("%s: impossible counts: %+v", what, whole)
			}
		}
		check("stream", data)
		run("application/json", data, int(cut)%(len(data)+1))
		// The data as Bedrock's count and latency headers, before a body
		// that has counts of its own: whatever the headers say, the
		// measurement has no impossible counts.
		if len(data) < 64 {
			v := string(data)
			h := http.Header{"X-Amzn-Bedrock-Input-Token-Count": {v}, "X-Amzn-Bedrock-Output-Token-Count": {v},
				"X-Amzn-Bedrock-Cache-Read-Input-Token-Count": {v}, "X-Amzn-Bedrock-Invocation-Latency": {v}}
			mt := New(DetectDialect(path).New(), Options{}, t0)
			mt.Request(path, nil, false)
			mt.ResponseHeader(h)
			mt.Response(200, "application/json", "")
			mt.Write([]byte(`{"generation":"Hi","prompt_token_count":3,"stop_reason":"stop"}`), t0.Add(step))
			m := mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
			if m.Usage.InputTokens < -1 || m.Usage.OutputTokens < -1 || m.Usage.CacheReadInputTokens < -1 {
				t.Fatalf("headers %q: impossible counts %+v", v, m.Usage)
			}
		}
		if len(data) > 4000 {
			return
		}
		if invoke {
			native := base64.StdEncoding.EncodeToString(data)
			check("chunk", append(bedrockFrame("chunk", data), bedrockFrame("chunk", []byte(`{"bytes":"`+native+`"}`))...))
			return
		}
		var s []byte
		for _, typ := range []string{"messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata"} {
			s = append(s, bedrockFrame(typ, data)...)
		}
		check("events", s)
	})
}
