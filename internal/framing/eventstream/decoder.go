package eventstream

import (
	"encoding/binary"
	"hash/crc32"
	"io"
)

// DefaultMaxMessageSize caps one message when Decoder.MaxMessageSize is zero.
// Bedrock's messages are a few hundred bytes (a delta, a usage block), so
// 1 MiB, the cap package sse uses for an event, leaves ample headroom.
const DefaultMaxMessageSize = 1 << 20

// Limits from the event stream specification. A length beyond them cannot
// come from a conforming sender, so it means the bytes are not an event
// stream (or are corrupt), not that a message is merely large.
const (
	maxHeadersLen = 128 << 10
	maxPayloadLen = 24 << 20
)

const (
	preludeLen = 12 // total length, headers length, prelude CRC
	crcLen     = 4
	minLen     = preludeLen + crcLen
)

// shrinkAbove bounds the buffer capacity a Decoder keeps across Reset, so
// one large message does not pin memory in a pooled decoder.
const shrinkAbove = 64 << 10

// The proxy plugs the decoder in wherever an io.Writer fits.
var _ io.Writer = (*Decoder)(nil)

// Stats counts what a Decoder saw.
type Stats struct {
	Messages  int64 // messages handed out
	Oversized int64 // well-formed messages skipped for exceeding MaxMessageSize
	Errors    int64 // faults that stopped decoding: 0 or 1 per stream
	Bytes     int64 // bytes fed
}

// Decoder cuts a byte stream into event stream messages. The zero value is
// ready to use. It is not safe for concurrent use, and OnMessage must not
// call back into the Decoder.
type Decoder struct {
	// OnMessage is called once per complete, verified message, inside
	// Write. The Message and its slices are valid only during the call.
	OnMessage func(*Message)
	// MaxMessageSize caps a message's total length; longer messages are
	// checksummed as they stream past, never buffered, and counted in
	// Stats.Oversized. Zero or negative means DefaultMaxMessageSize.
	MaxMessageSize int

	state   uint8
	pre     [preludeLen]byte // a prelude (or a skipped message's CRC) split across writes
	npre    int              // bytes of pre filled
	total   int              // length of the current message
	headers int              // headers length of the current message
	skip    int              // bytes of an oversized message still to checksum
	crc     uint32           // running CRC of an oversized message
	buf     []byte           // a message split across writes, prelude included
	msg     Message          // handed to OnMessage; reused so it does not allocate
	stats   Stats
}

// Decoder states: what the next byte of the stream is.
const (
	statePrelude uint8 = iota // part of a prelude, collected in pre
	stateBody                 // part of a message, collected in buf
	stateSkip                 // part of an oversized message's headers or payload
	stateSkipCRC              // part of an oversized message's CRC, collected in pre
	stateBroken               // after a fault: only counted
)

// Write decodes p, calling OnMessage for every message p completes. It
// always returns len(p), nil, so it can sit behind an io.Writer without
// ever failing the stream it observes.
func (d *Decoder) Write(p []byte) (int, error) {
	n := len(p)
	d.stats.Bytes += int64(n)
	for len(p) > 0 {
		switch d.state {
		case statePrelude:
			if d.npre == 0 && len(p) >= preludeLen {
				// The common case, a write holding whole messages: decode
				// them in place, without copying.
				if !d.begin(p[:preludeLen]) {
					continue
				}
				if d.state == stateBody && len(p) >= d.total {
					d.finish(p[:d.total])
					p = p[d.total:]
					continue
				}
				if d.state == stateBody {
					d.buf = append(d.buf[:0], p[:preludeLen]...)
				}
				p = p[preludeLen:]
				continue
			}
			k := copy(d.pre[d.npre:], p)
			d.npre += k
			p = p[k:]
			if d.npre < preludeLen {
				continue
			}
			d.npre = 0
			if d.begin(d.pre[:]) && d.state == stateBody {
				d.buf = append(d.buf[:0], d.pre[:]...)
			}
		case stateBody:
			k := min(d.total-len(d.buf), len(p))
			d.buf = append(d.buf, p[:k]...)
			p = p[k:]
			if len(d.buf) == d.total {
				d.finish(d.buf)
				d.buf = d.buf[:0]
			}
		case stateSkip:
			k := min(d.skip, len(p))
			d.crc = crc32.Update(d.crc, crc32.IEEETable, p[:k])
			d.skip -= k
			p = p[k:]
			if d.skip == 0 {
				d.state = stateSkipCRC
			}
		case stateSkipCRC:
			k := copy(d.pre[d.npre:crcLen], p)
			d.npre += k
			p = p[k:]
			if d.npre < crcLen {
				continue
			}
			d.npre = 0
			if binary.BigEndian.Uint32(d.pre[:crcLen]) != d.crc {
				d.fail()
				continue
			}
			d.stats.Oversized++
			d.state = statePrelude
		default:
			return n, nil
		}
	}
	return n, nil
}

// begin reads a prelude and chooses how to take the rest of its message. It
// reports false when the prelude is corrupt and decoding has stopped.
func (d *Decoder) begin(pre []byte) bool {
	if crc32.ChecksumIEEE(pre[:8]) != binary.BigEndian.Uint32(pre[8:preludeLen]) {
		d.fail()
		return false
	}
	total := binary.BigEndian.Uint32(pre[0:4])
	headers := binary.BigEndian.Uint32(pre[4:8])
	if total < minLen || headers > maxHeadersLen || headers > total-minLen || total-minLen-headers > maxPayloadLen {
		d.fail()
		return false
	}
	d.total, d.headers = int(total), int(headers)
	max := d.MaxMessageSize
	if max <= 0 {
		max = DefaultMaxMessageSize
	}
	if d.total > max {
		d.state = stateSkip
		d.skip = d.total - minLen
		d.crc = crc32.ChecksumIEEE(pre[:preludeLen])
		if d.skip == 0 {
			d.state = stateSkipCRC
		}
		return true
	}
	d.state = stateBody
	return true
}

// finish verifies a whole message and hands it out.
func (d *Decoder) finish(b []byte) {
	end := len(b) - crcLen
	if crc32.ChecksumIEEE(b[:end]) != binary.BigEndian.Uint32(b[end:]) {
		d.fail()
		return
	}
	m := &d.msg
	*m = Message{Headers: b[preludeLen : preludeLen+d.headers], Payload: b[preludeLen+d.headers : end]}
	if !m.parseHeaders() {
		*m = Message{}
		d.fail()
		return
	}
	d.state = statePrelude
	d.stats.Messages++
	if d.OnMessage != nil {
		d.OnMessage(m)
	}
	*m = Message{}
}

func (d *Decoder) fail() {
	d.stats.Errors++
	d.state = stateBroken
	d.buf = d.buf[:0]
}

// Close ends the stream. A message cut short by the end is dropped: without
// its checksum nothing in it can be trusted. It is not counted as an error,
// because a short stream is the reader's to judge (a truncated response),
// not a framing fault.
func (d *Decoder) Close() {
	if d.state != stateBroken {
		d.state = statePrelude
	}
	d.npre = 0
	d.buf = d.buf[:0]
}

// Reset clears the decoder for a new stream, keeping its buffer unless it
// grew large.
func (d *Decoder) Reset() {
	buf := d.buf[:0]
	if cap(buf) > shrinkAbove {
		buf = nil
	}
	*d = Decoder{OnMessage: d.OnMessage, MaxMessageSize: d.MaxMessageSize, buf: buf}
}

// Stats returns the counters so far.
func (d *Decoder) Stats() Stats { return d.stats }
