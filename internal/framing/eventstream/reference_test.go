package eventstream

import (
	"bytes"
	"io"
	"testing"

	aws "github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/tokentap/tokentap/internal/testutil/splitfeed"
)

// rec is a deep copy of a Message, comparable with ==, so tests can keep
// messages that are only valid during the callback.
type rec struct {
	MessageType, EventType, ExceptionType, ContentType string
	ErrorCode, ErrorMessage                            string
	Payload                                            string
}

func recOf(m *Message) rec {
	return rec{
		string(m.MessageType), string(m.EventType), string(m.ExceptionType), string(m.ContentType),
		string(m.ErrorCode), string(m.ErrorMessage), string(m.Payload),
	}
}

// decodeChunks feeds the chunks to a Decoder and returns its messages and
// stats after Close.
func decodeChunks(chunks [][]byte, max int) ([]rec, Stats) {
	var got []rec
	d := &Decoder{MaxMessageSize: max, OnMessage: func(m *Message) { got = append(got, recOf(m)) }}
	splitfeed.Feed(d, chunks)
	return got, d.Stats()
}

// awsDecode is the reference: AWS's decoder reading the whole stream, message
// by message, until the input ends or it fails. clean is true when it
// consumed every byte without error.
func awsDecode(b []byte) (msgs []rec, clean bool) {
	r := bytes.NewReader(b)
	dec := aws.NewDecoder()
	for r.Len() > 0 {
		m, err := dec.Decode(r, nil)
		if err != nil {
			return msgs, false
		}
		msgs = append(msgs, awsRec(m))
	}
	return msgs, true
}

func awsRec(m aws.Message) rec {
	str := func(name string) string {
		// Only string values count: that is the type the specification
		// gives these headers.
		if v, ok := m.Headers.Get(name).(aws.StringValue); ok {
			return string(v)
		}
		return ""
	}
	return rec{
		str(":message-type"), str(":event-type"), str(":exception-type"), str(":content-type"),
		str(":error-code"), str(":error-message"), string(m.Payload),
	}
}

// checkAgainstAWS decodes b whole and split at cut and compares both with
// AWS's decoder: the same messages, an error exactly when AWS's decoder
// found corruption rather than a clean end, never more.
func checkAgainstAWS(t *testing.T, b []byte, cut int) {
	t.Helper()
	want, clean := awsDecode(b)
	got, st := decodeChunks([][]byte{b}, 0)
	if !equalRecs(got, want) {
		t.Fatalf("whole: got %+v\nAWS decoder: %+v", got, want)
	}
	if clean && st.Errors != 0 {
		t.Fatalf("AWS decoder reads it cleanly, decoder counted %d errors", st.Errors)
	}
	if st.Messages != int64(len(got)) || st.Bytes != int64(len(b)) {
		t.Fatalf("stats %+v for %d messages, %d bytes", st, len(got), len(b))
	}
	split, splitSt := decodeChunks(splitfeed.At(b, cut), 0)
	if !equalRecs(split, got) || splitSt != st {
		t.Fatalf("cut at %d: got %+v %+v, want %+v %+v", cut, split, splitSt, got, st)
	}
}

func equalRecs(a, b []rec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The reference must itself read the fixtures, or the comparison proves
// nothing.
func TestAWSDecoderReadsFixtures(t *testing.T) {
	for name, b := range loadFixtures(t) {
		msgs, clean := awsDecode(b)
		if !clean || len(msgs) == 0 {
			t.Errorf("%s: AWS decoder clean=%v, %d messages", name, clean, len(msgs))
		}
	}
	if _, err := aws.NewDecoder().Decode(bytes.NewReader(nil), nil); err != io.EOF {
		t.Errorf("empty input: %v", err)
	}
}
