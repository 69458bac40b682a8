package eventstream

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	aws "github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// The binary fixtures in testdata are built here with AWS's own encoder, so
// they are independent of the decoder under test. Run
//
//	go test ./eventstream -run TestFixturesUpToDate -update
//
// after changing a fixture below; TestFixturesUpToDate fails while the
// committed files and this generator disagree.
var update = flag.Bool("update", false, "rewrite testdata/*.bin from the fixture generator")

// awsEvent is a Bedrock-style event message: the three headers in the order
// Bedrock sends them, and a JSON payload.
func awsEvent(eventType, payload string) aws.Message {
	var m aws.Message
	m.Headers.Set(":event-type", aws.StringValue(eventType))
	m.Headers.Set(":content-type", aws.StringValue("application/json"))
	m.Headers.Set(":message-type", aws.StringValue("event"))
	m.Payload = []byte(payload)
	return m
}

// awsException is a modelled error message, as Bedrock ends a stream that
// failed after its 200.
func awsException(exceptionType, payload string) aws.Message {
	var m aws.Message
	m.Headers.Set(":exception-type", aws.StringValue(exceptionType))
	m.Headers.Set(":content-type", aws.StringValue("application/json"))
	m.Headers.Set(":message-type", aws.StringValue("exception"))
	m.Payload = []byte(payload)
	return m
}

// fixtureMessages are the fixtures, file name to messages.
func fixtureMessages() map[string][]aws.Message {
	allTypes := aws.Message{Payload: []byte(`{"k":"v"}`)}
	for _, h := range []aws.Header{
		{Name: "t", Value: aws.BoolValue(true)},
		{Name: "f", Value: aws.BoolValue(false)},
		{Name: "b", Value: aws.Int8Value(-3)},
		{Name: "s", Value: aws.Int16Value(-300)},
		{Name: "i", Value: aws.Int32Value(70000)},
		{Name: "l", Value: aws.Int64Value(1 << 40)},
		{Name: "bytes", Value: aws.BytesValue("\x00\x07\xff binary, not a string")},
		{Name: ":event-type", Value: aws.StringValue("allTypes")},
		{Name: "ts", Value: aws.TimestampValue(time.UnixMilli(1767225600123).UTC())},
		{Name: "uuid", Value: aws.UUIDValue{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		{Name: ":message-type", Value: aws.StringValue("event")},
		// A name one letter short of one we read: not :content-type.
		{Name: ":content-typ", Value: aws.StringValue("not/this")},
		// A name we read with a bytes value: the specification makes it a
		// string, so this reads as absent rather than as raw bytes.
		{Name: ":content-type", Value: aws.BytesValue("application/json")},
	} {
		allTypes.Headers = append(allTypes.Headers, h)
	}
	var unmodelled aws.Message
	unmodelled.Headers.Set(":message-type", aws.StringValue("error"))
	unmodelled.Headers.Set(":error-code", aws.StringValue("InternalFailure"))
	unmodelled.Headers.Set(":error-message", aws.StringValue("An internal error occurred."))

	return map[string][]aws.Message{
		"converse_stream.bin": {
			awsEvent("messageStart", `{"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ012345678","role":"assistant"}`),
			awsEvent("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hello"},"p":"abcdefghijklmnopqrstuvwxyz"}`),
			awsEvent("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":" there, café 😊"},"p":"abcdefghij"}`),
			awsEvent("contentBlockStop", `{"contentBlockIndex":0,"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKL"}`),
			awsEvent("messageStop", `{"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNO","stopReason":"end_turn"}`),
			awsEvent("metadata", `{"metrics":{"latencyMs":412},"p":"abcdefghijklmnopqrstuvwxyzABCDEF","usage":{"inputTokens":14,"outputTokens":6,"totalTokens":20}}`),
		},
		"invoke_chunks.bin": {
			awsEvent("chunk", `{"bytes":"eyJ0eXBlIjoibWVzc2FnZV9zdGFydCJ9","p":"abcdefghijklmnopqrstuvwxyzABCDEFG"}`),
			awsEvent("chunk", `{"bytes":"eyJ0eXBlIjoibWVzc2FnZV9zdG9wIn0=","p":"abcd"}`),
		},
		"exception.bin": {
			awsEvent("messageStart", `{"p":"abc","role":"assistant"}`),
			awsException("throttlingException", `{"message":"Too many tokens, please wait before trying again."}`),
		},
		"unmodelled_error.bin": {unmodelled},
		"all_header_types.bin": {
			allTypes,
			{}, // no headers, no payload: the smallest message, 16 bytes
			{Payload: []byte("payload without headers")},
		},
	}
}

// encodeFixture encodes messages back to back, as a response body holds them.
func encodeFixture(t testing.TB, msgs []aws.Message) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := aws.NewEncoder()
	for _, m := range msgs {
		if err := enc.Encode(&buf, m); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func TestFixturesUpToDate(t *testing.T) {
	for name, msgs := range fixtureMessages() {
		want := encodeFixture(t, msgs)
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from its generator; run with -update", name)
		}
	}
}

// loadFixtures reads every testdata/*.bin file.
func loadFixtures(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.bin"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	out := make(map[string][]byte, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}
