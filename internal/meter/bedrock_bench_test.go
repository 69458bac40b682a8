package meter

import "testing"

// benchBedrock is the per-event cost on the hot path: one event stream
// message decoded and read by a Bedrock dialect, one message per Write as
// reverse_proxy delivers them.
func benchBedrock(b *testing.B, path, fixture string, warm, event int) {
	benchEvent(b, bedrockMeter(b, path, Options{}), bedrockFrames(testdata(b, "bedrock", fixture)), warm, event)
}

// BenchmarkBedrockConverseEvent: a ConverseStream text delta.
func BenchmarkBedrockConverseEvent(b *testing.B) {
	benchBedrock(b, bedrockConversePath, "converse_text.bin", 3, 3)
}

// BenchmarkBedrockInvokeEvent: an InvokeModelWithResponseStream chunk holding
// an Anthropic text delta, base64 decoding included.
func BenchmarkBedrockInvokeEvent(b *testing.B) {
	benchBedrock(b, bedrockInvokePath, "invoke_anthropic.bin", 3, 3)
}

// BenchmarkBedrockConverseStream is one whole exchange: a Meter set up, the
// seven-message stream fed in one write, and the Finish.
func BenchmarkBedrockConverseStream(b *testing.B) {
	benchStream(b, func() Dialect { return newBedrock(false) }, exchange{200, bedrockMediaType, ""}, testdata(b, "bedrock", "converse_text.bin"))
}

// BenchmarkBedrockInvokeNovaEvent: a recorded Nova text delta chunk, read
// by InvokeModel's family reader.
func BenchmarkBedrockInvokeNovaEvent(b *testing.B) {
	frames := bedrockFrames(testdata(b, "recorded", "bedrock/invoke_nova_micro_stream.bin"))
	benchEvent(b, bedrockMeter(b, "/model/amazon.nova-micro-v1:0/invoke-with-response-stream", Options{}), frames, 3, 3)
}
