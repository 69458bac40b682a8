package eventstream

import (
	"bytes"
	"testing"

	aws "github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// deltaFrame is one ConverseStream text delta, the message a Bedrock stream
// is mostly made of.
func deltaFrame(b testing.TB) []byte {
	return encodeFixture(b, []aws.Message{
		awsEvent("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":" quick"},"p":"abcdefghijklmnopqrstuvwxyzABCD"}`),
	})
}

// BenchmarkDecoder is the per-message cost, one message per Write as a proxy
// sees them when Bedrock flushes per delta.
func BenchmarkDecoder(b *testing.B) {
	frame := deltaFrame(b)
	var n int
	d := &Decoder{OnMessage: func(m *Message) { n += len(m.Payload) }}
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		d.Write(frame)
	}
}

// BenchmarkDecoderSplit is the same message arriving in two writes, so it
// goes through the buffer.
func BenchmarkDecoderSplit(b *testing.B) {
	frame := deltaFrame(b)
	var n int
	d := &Decoder{OnMessage: func(m *Message) { n += len(m.Payload) }}
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		d.Write(frame[:40])
		d.Write(frame[40:])
	}
}

// BenchmarkAWSDecoder is AWS's decoder on the same message, for comparison:
// it is why this package exists.
func BenchmarkAWSDecoder(b *testing.B) {
	frame := deltaFrame(b)
	dec := aws.NewDecoder()
	payload := make([]byte, 0, 1024)
	r := bytes.NewReader(frame)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(frame)
		if _, err := dec.Decode(r, payload); err != nil {
			b.Fatal(err)
		}
	}
}
