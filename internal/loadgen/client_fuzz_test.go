package loadgen

import (
	"context"
	"io"
	"testing"

	"github.com/tokentap/tokentap/sse"
)

// FuzzRead holds the client's read loop to one whole-body pass of the sse
// package's Decoder, which follows the SSE specification (and its own
// fuzzing and reference tests): whatever the bytes and however the reads
// split them, with or without data beside io.EOF, the reader must find the
// same events, and so the same content events, usage, ids and ending.
func FuzzRead(f *testing.F) {
	for _, s := range []string{
		"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r\n\r\ndata: [DONE]\r\n\r\n",
		"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\r\rdata: [DONE]\r\r",
		"\xEF\xBB\xBFdata: {\"id\":\"x\",\"model\":\"m\",\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[],\"usage\":{\"completion_tokens\":3}}\n\ndata: [DONE]",
		": tokentap-sim-sent=1000\ndata: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n: ping\n\ndata:[DONE]\n\n",
		"data: {\"choices\":\ndata: [{\"delta\":{\"content\":\"a\"}}]}\n\nid: 7\nretry: 10\n\ndata\n\n",
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\"}}\n\nevent: content_block_delta\ndata: {\"delta\":{\"text\":\"a\"}}\n\nevent: message_delta\ndata: {\"usage\":{\"output_tokens\":9}}\n\nevent: message_stop\ndata: {}\n\n",
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
		"data: {\"error\":{\"message\":\"bad\"}}\n\n",
	} {
		for _, chunk := range []uint8{0, 1, 2, 7} {
			f.Add([]byte(s), chunk, false)
			f.Add([]byte(s), chunk, true)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, chunk uint8, anthropic bool) {
		if len(body) > 1<<16 {
			// Far under the line and event caps, where both parts refuse
			// input in their own ways.
			return
		}
		api := OpenAI
		if anthropic {
			api = Anthropic
		}
		got := &Result{}
		got.read(context.Background(), api, &chunkReader{b: body, n: int(chunk), eofWithData: chunk%2 == 1})

		want := &Result{}
		done := false
		d := sse.Decoder{OnEvent: func(e *sse.Event) {
			want.Events++
			switch readEvent(api, e.Type, e.Data, want) {
			case eventContent:
				want.ContentEvents++
			case eventDone:
				done = true
			case eventError:
				want.fail(ErrStream, want.StreamError)
			}
		}}
		_, _ = d.Write(body)
		d.Close()
		if !done {
			want.fail(ErrTruncated, "")
		}
		if !want.UsageReported {
			want.OutputTokens = want.ContentEvents
		}

		if got.Events != want.Events || got.ContentEvents != want.ContentEvents ||
			got.OutputTokens != want.OutputTokens || got.UsageReported != want.UsageReported ||
			got.ResponseID != want.ResponseID || got.ResponseModel != want.ResponseModel ||
			got.StreamError != want.StreamError || got.ErrorKind != want.ErrorKind {
			t.Fatalf("reads of %d bytes: got %d events, %d content, %d tokens (usage %v), id %q, model %q, stream error %q, error %q (%s)\n"+
				"the sse Decoder's events give %d, %d, %d (%v), %q, %q, %q, %q",
				chunk, got.Events, got.ContentEvents, got.OutputTokens, got.UsageReported, got.ResponseID, got.ResponseModel, got.StreamError, got.ErrorKind, got.Error,
				want.Events, want.ContentEvents, want.OutputTokens, want.UsageReported, want.ResponseID, want.ResponseModel, want.StreamError, want.ErrorKind)
		}
		if wantGaps := max(got.ContentEvents-1, 0); len(got.Gaps) != wantGaps {
			t.Errorf("%d gaps for %d content events", len(got.Gaps), got.ContentEvents)
		}
		if len(got.Delays) > got.Events {
			t.Errorf("%d delays for %d events", len(got.Delays), got.Events)
		}
	})
}

// chunkReader returns b n bytes a read (all of it when n is 0), and with
// eofWithData the last bytes together with io.EOF, as io.Reader allows.
type chunkReader struct {
	b           []byte
	n           int
	eofWithData bool
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := len(c.b)
	if c.n > 0 {
		n = min(n, c.n)
	}
	n = copy(p, c.b[:n])
	c.b = c.b[n:]
	if c.eofWithData && len(c.b) == 0 {
		return n, io.EOF
	}
	return n, nil
}
