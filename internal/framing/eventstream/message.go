package eventstream

import "encoding/binary"

// Message is one decoded message: the values of the headers that say what
// it is, and its payload.
//
// Its slices alias the Decoder's buffer or the caller's Write buffer and are
// valid only during the OnMessage call. A header that is absent, or not of
// the string type the specification gives it, is nil.
type Message struct {
	// MessageType is :message-type: "event", "exception" (a modelled
	// error) or "error" (an unmodelled one).
	MessageType []byte
	// EventType is :event-type, e.g. "contentBlockDelta" or "chunk".
	EventType []byte
	// ExceptionType is :exception-type, e.g. "throttlingException".
	ExceptionType []byte
	// ContentType is :content-type of the payload, e.g. "application/json".
	ContentType []byte
	// ErrorCode and ErrorMessage are :error-code and :error-message of an
	// unmodelled error, which has no payload.
	ErrorCode    []byte
	ErrorMessage []byte
	// Headers is the whole encoded header block, for headers not named
	// above.
	Headers []byte
	// Payload is the message body: for Bedrock, a JSON document.
	Payload []byte
}

// Header value types, from the specification.
const (
	typeTrue uint8 = iota
	typeFalse
	typeByte
	typeShort
	typeInt
	typeLong
	typeBytes
	typeString
	typeTimestamp
	typeUUID
)

// fixedLen is the value length of each fixed-size header type.
var fixedLen = [...]int{typeTrue: 0, typeFalse: 0, typeByte: 1, typeShort: 2, typeInt: 4, typeLong: 8, typeTimestamp: 8, typeUUID: 16}

// parseHeaders walks the header block, picking out the headers Message
// names. It reports false when the block is malformed: a value running past
// its end or an unknown type. A repeated header keeps its last value, as
// AWS's decoder does.
func (m *Message) parseHeaders() bool {
	h := m.Headers
	for len(h) > 0 {
		nameLen := int(h[0])
		if len(h) == 1 && nameLen > 0 {
			// AWS's decoder ends the headers here (its read of the name
			// finds no bytes, which it takes for the end of the block), so
			// the SDK clients accept such a message; an observer must not
			// call corrupt what the client it watches reads fine.
			break
		}
		if 1+nameLen+1 > len(h) {
			return false
		}
		name := h[1 : 1+nameLen]
		typ := h[1+nameLen]
		h = h[2+nameLen:]
		switch typ {
		case typeBytes, typeString:
			if len(h) < 2 {
				return false
			}
			n := int(binary.BigEndian.Uint16(h))
			if 2+n > len(h) {
				return false
			}
			if typ == typeString {
				m.set(name, h[2:2+n:2+n])
			} else {
				m.set(name, nil)
			}
			h = h[2+n:]
		case typeTrue, typeFalse, typeByte, typeShort, typeInt, typeLong, typeTimestamp, typeUUID:
			n := fixedLen[typ]
			if n > len(h) {
				return false
			}
			m.set(name, nil)
			h = h[n:]
		default:
			return false
		}
	}
	return true
}

// set records a header's string value; nil clears it, so a repeated header
// whose last value is not a string reads as absent.
func (m *Message) set(name, value []byte) {
	// Dispatch on length first: it rules out most names without comparing
	// bytes.
	switch len(name) {
	case len(":event-type"): // and :error-code
		if string(name) == ":event-type" {
			m.EventType = value
		} else if string(name) == ":error-code" {
			m.ErrorCode = value
		}
	case len(":message-type"): // and :content-type
		switch string(name) {
		case ":message-type":
			m.MessageType = value
		case ":content-type":
			m.ContentType = value
		}
	case len(":exception-type"):
		if string(name) == ":exception-type" {
			m.ExceptionType = value
		}
	case len(":error-message"):
		if string(name) == ":error-message" {
			m.ErrorMessage = value
		}
	}
}
