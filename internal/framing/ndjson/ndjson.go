// Package ndjson is a push-style decoder of newline-delimited JSON streams
// (application/x-ndjson, as Ollama's native API streams them). It is the
// NDJSON counterpart of package sse: fed arbitrary byte splits, it hands out
// complete lines, never keeps the caller's buffer, never allocates in
// steady state, and skips (and counts) lines over a size cap instead of
// buffering them whole.
package ndjson

import "bytes"

// DefaultMaxLineSize caps one line when Decoder.MaxLineSize is zero.
const DefaultMaxLineSize = 1 << 20

// Stats counts what a Decoder saw.
type Stats struct {
	Lines     int64 // non-blank lines handed out, including an unterminated last one
	Oversized int64 // lines skipped for exceeding MaxLineSize
	Bytes     int64 // bytes fed
}

// Decoder cuts a byte stream into lines. The zero value is ready to use.
type Decoder struct {
	// OnLine is called once per non-blank line, without its line end (LF
	// or CRLF). The slice is valid only during the call.
	OnLine func(line []byte)
	// MaxLineSize caps a line's bytes up to its LF (a CR before it
	// counts); longer lines are skipped whole and counted. Zero means
	// DefaultMaxLineSize.
	MaxLineSize int

	buf        []byte // the start of a line split across writes
	discarding bool   // inside an over-long line, until its end
	stats      Stats
}

// Write decodes p. It always returns len(p), nil, so it can sit behind an
// io.Writer without ever failing the stream it observes.
func (d *Decoder) Write(p []byte) (int, error) {
	n := len(p)
	d.stats.Bytes += int64(n)
	max := d.MaxLineSize
	if max <= 0 {
		max = DefaultMaxLineSize
	}
	for len(p) > 0 {
		i := indexLF(p)
		if i < 0 {
			d.carry(p, max)
			break
		}
		line := p[:i]
		p = p[i+1:]
		switch {
		case d.discarding:
			d.discarding = false
		case len(d.buf) > 0:
			if len(d.buf)+len(line) > max {
				d.stats.Oversized++
			} else {
				d.buf = append(d.buf, line...)
				d.emit(d.buf)
			}
		case len(line) > max:
			d.stats.Oversized++
		default:
			d.emit(line)
		}
		d.buf = d.buf[:0]
	}
	return n, nil
}

// carry keeps the start of a line that continues in the next write.
func (d *Decoder) carry(p []byte, max int) {
	if d.discarding {
		return
	}
	if len(d.buf)+len(p) > max {
		d.stats.Oversized++
		d.discarding = true
		d.buf = d.buf[:0]
		return
	}
	d.buf = append(d.buf, p...)
}

func (d *Decoder) emit(line []byte) {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if isBlank(line) {
		return
	}
	d.stats.Lines++
	if d.OnLine != nil {
		d.OnLine(line)
	}
}

// Close ends the stream: a last line without its line end is handed out,
// because NDJSON writers often omit the final newline.
func (d *Decoder) Close() {
	if !d.discarding && len(d.buf) > 0 {
		d.emit(d.buf)
	}
	d.buf = d.buf[:0]
	d.discarding = false
}

// Reset clears the decoder for a new stream, keeping its buffer.
func (d *Decoder) Reset() {
	d.buf = d.buf[:0]
	d.discarding = false
	d.stats = Stats{}
}

// Stats returns the counters so far.
func (d *Decoder) Stats() Stats { return d.stats }

func indexLF(p []byte) int {
	return bytes.IndexByte(p, '\n')
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}
