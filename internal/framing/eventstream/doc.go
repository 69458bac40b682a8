// Package eventstream is a push-style decoder of the AWS binary event stream
// framing (application/vnd.amazon.eventstream), which Bedrock's
// ConverseStream and InvokeModelWithResponseStream responses use. It is the
// binary counterpart of packages sse and ndjson: fed arbitrary byte splits,
// it hands out complete messages, never keeps the caller's buffer, never
// allocates in steady state, and skips (and counts) messages over a size cap
// instead of buffering them.
//
// A message is
//
//	uint32 total length    (big-endian, the whole message)
//	uint32 headers length
//	uint32 prelude CRC     (CRC-32 IEEE of the 8 bytes above)
//	headers
//	payload
//	uint32 message CRC     (CRC-32 IEEE of everything before it)
//
// Both checksums are verified. The framing has no resynchronisation point,
// so a bad checksum, an impossible length or malformed headers end the
// decoding of the stream: the fault is counted in Stats.Errors and the rest
// of the bytes are only counted.
//
// AWS's own decoder (github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream)
// pulls from an io.Reader and allocates every header of every message; this
// package is tested against it, message for message.
package eventstream
