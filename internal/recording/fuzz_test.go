package recording

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// FuzzRead: no input makes Read panic, and what it accepts from a
// recording survives being written and read again unchanged.
func FuzzRead(f *testing.F) {
	if b, err := os.ReadFile("testdata/mooncake_conversation_head.jsonl"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"start":"2026-12-06T09:00:00.5Z","route":"/v1/chat/completions","api":"openai_chat","model":"m","stream":true,"input_tokens":12,"output_tokens":41,"output_tokens_source":"reported","outcome":"completed","duration_seconds":1.1}`))
	f.Add([]byte(`{"timestamp": 12.5, "text_input": "hi", "output_length": 3}` + "\n\n" + `{"timestamp": 0, "input_length": 9}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		lines, format, err := Read(bytes.NewReader(b))
		if err != nil || format != Tokentap {
			return
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		for _, l := range lines {
			if err := enc.Encode(l); err != nil {
				t.Fatalf("encoding a line read: %v", err)
			}
		}
		back, _, err := Read(&buf)
		if err != nil {
			t.Fatalf("reading back what was read: %v", err)
		}
		for i := range lines {
			// Times compare by instant: the location is not kept.
			back[i].Start, lines[i].Start = back[i].Start.UTC(), lines[i].Start.UTC()
			if len(lines[i].Input) > 0 {
				var a, b any
				_ = json.Unmarshal(lines[i].Input, &a)
				_ = json.Unmarshal(back[i].Input, &b)
				if !reflect.DeepEqual(a, b) {
					t.Fatalf("line %d input differs", i)
				}
				lines[i].Input, back[i].Input = nil, nil
			}
		}
		if !reflect.DeepEqual(lines, back) {
			t.Fatalf("read back differs:\n%+v\n%+v", lines, back)
		}
	})
}
