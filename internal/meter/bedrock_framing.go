package meter

import (
	"github.com/tokentap/tokentap/internal/framing/eventstream"
	"github.com/tokentap/tokentap/sse"
)

// bedrockFramer adapts the event stream decoder to the Meter: each message
// becomes an sse.Event whose Type is the :event-type (or a prefixed
// exception type or error code) and whose Data is the payload. A broken
// framing is reported by Faults, not as an event.
type bedrockFramer struct {
	dec  eventstream.Decoder
	emit func(*sse.Event)
	ev   sse.Event
	typ  []byte
}

func (f *bedrockFramer) init(maxEvent int, emit func(*sse.Event)) {
	f.dec.Reset()
	f.dec.MaxMessageSize = maxEvent
	f.dec.OnMessage = f.onMessage
	f.emit = emit
}

// Write implements Framer. When the framing breaks (a bad checksum, or
// bytes that are no event stream at all), the decoder stops: Faults says so
// at Finish.
func (f *bedrockFramer) Write(p []byte) (int, error) {
	n, _ := f.dec.Write(p)
	return n, nil
}

// Close implements Framer. A message cut short by the end of the stream is
// dropped; the missing end-of-stream event makes the outcome truncated.
func (f *bedrockFramer) Close() { f.dec.Close() }

// Oversized implements Framer.
func (f *bedrockFramer) Oversized() int64 { return f.dec.Stats().Oversized }

// Faults implements FramerFaults: the decoder stops at the first fault, so
// there is at most one, and the measurement says the stream broke rather
// than ended.
func (f *bedrockFramer) Faults() (n int64, reason string) {
	if n = f.dec.Stats().Errors; n > 0 {
		reason = "eventstream_corrupt"
	}
	return n, reason
}

func (f *bedrockFramer) onMessage(m *eventstream.Message) {
	switch string(m.MessageType) {
	case "exception":
		f.typ = append(append(f.typ[:0], bedrockExceptionPrefix...), m.ExceptionType...)
		f.ev.Type = f.typ
	case "error":
		f.typ = append(append(f.typ[:0], bedrockErrorPrefix...), m.ErrorCode...)
		f.ev.Type = f.typ
	default:
		f.ev.Type = m.EventType
	}
	f.ev.Data = m.Payload
	f.emit(&f.ev)
	f.ev = sse.Event{}
}
