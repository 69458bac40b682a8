package sse

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"

	"github.com/tokentap/tokentap/internal/testutil/splitfeed"
)

// benchWords gives the fixture realistic token-sized deltas, including
// escaped quotes and multi-byte UTF-8, as a chat model would stream them.
var benchWords = []string{
	" The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".",
	" In", " Go", ",", " a", " slice", " is", " a", " view", " into", " an", " array", ";",
	` \"quoted\"`, " naïve", " café", " 😊", "\\n\\n", "**", "bold", "**", " `code`", " 42", "%",
}

// openAIStream builds a chat.completion.chunk stream of n content deltas,
// framed exactly as api.openai.com frames it (one `data:` line and a blank
// line per chunk, role chunk first, then finish, usage and [DONE]). Each
// event is returned separately so the benchmark can write one per call, as
// a proxy does when upstream flushes per token.
func openAIStream(n int) [][]byte {
	const head = `{"id":"chatcmpl-AbC123xYz789Q0W1e2R3t4Y5u6I7o8P","object":"chat.completion.chunk","created":1733145600,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":`
	var events [][]byte
	add := func(payload string) {
		events = append(events, []byte("data: "+payload+"\n\n"))
	}
	add(head + `{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`)
	for i := range n {
		w := benchWords[i%len(benchWords)]
		add(head + `{"content":"` + w + `"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	}
	add(head + `{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`)
	add(`{"id":"chatcmpl-AbC123xYz789Q0W1e2R3t4Y5u6I7o8P","object":"chat.completion.chunk","created":1733145600,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[],"usage":{"prompt_tokens":1043,"completion_tokens":` + strconv.Itoa(n) + `,"total_tokens":` + strconv.Itoa(1043+n) + `,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`)
	add("[DONE]")
	return events
}

// anthropicStream is the same idea for the Anthropic Messages API, whose
// events carry an `event:` line, with a ping in the middle.
func anthropicStream(n int) [][]byte {
	var events [][]byte
	add := func(typ, payload string) {
		events = append(events, []byte("event: "+typ+"\ndata: "+payload+"\n\n"))
	}
	add("message_start", `{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-20250514","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1043,"output_tokens":1}}}`)
	add("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	add("ping", `{"type": "ping"}`)
	for i := range n {
		add("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+benchWords[i%len(benchWords)]+`"}}`)
	}
	add("content_block_stop", `{"type":"content_block_stop","index":0}`)
	add("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":`+strconv.Itoa(n)+`}}`)
	add("message_stop", `{"type":"message_stop"}`)
	return events
}

func benchDecode(b *testing.B, writes [][]byte) {
	total := 0
	for _, w := range writes {
		total += len(w)
	}
	var events, sink int
	d := &Decoder{OnEvent: func(e *Event) {
		events++
		sink += len(e.Data)
	}}
	b.ReportAllocs()
	b.SetBytes(int64(total))
	for b.Loop() {
		for _, w := range writes {
			d.Write(w)
		}
		// Close alone readies the decoder for the next stream; Reset would
		// also drop buffers over 64 KiB, which BenchmarkLongEvent's event
		// would then re-grow on every iteration.
		d.Close()
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
	_ = sink
}

// BenchmarkDecoder measures the decoder alone on realistic LLM streams, in
// the write patterns a proxy sees: one write per event (upstream flushes per
// token), large copy-buffer writes, and tiny writes that split every line.
func BenchmarkDecoder(b *testing.B) {
	streams := []struct {
		name   string
		events [][]byte
	}{
		{"openai", openAIStream(500)},
		{"anthropic", anthropicStream(500)},
	}
	for _, s := range streams {
		whole := bytes.Join(s.events, nil)
		crlf := bytes.ReplaceAll(whole, []byte("\n"), []byte("\r\n"))
		b.Run(s.name+"/write-per-event", func(b *testing.B) { benchDecode(b, s.events) })
		b.Run(s.name+"/32KiB-writes", func(b *testing.B) { benchDecode(b, splitfeed.Sized(whole, 32<<10)) })
		b.Run(s.name+"/7B-writes", func(b *testing.B) { benchDecode(b, splitfeed.Sized(whole, 7)) })
		b.Run(s.name+"/crlf-32KiB-writes", func(b *testing.B) { benchDecode(b, splitfeed.Sized(crlf, 32<<10)) })
	}
}

// BenchmarkLongEvent shows that a large event arriving in many writes costs
// linear time: partial lines are appended to, never rescanned.
func BenchmarkLongEvent(b *testing.B) {
	for _, size := range []int{64 << 10, 512 << 10} {
		line := bytes.Repeat([]byte("x"), size)
		stream := append(append([]byte("data: "), line...), "\n\n"...)
		for _, w := range []int{16, 4096} {
			b.Run(fmt.Sprintf("%dKiB/%dB-writes", size>>10, w), func(b *testing.B) {
				benchDecode(b, splitfeed.Sized(stream, w))
			})
		}
	}
}
