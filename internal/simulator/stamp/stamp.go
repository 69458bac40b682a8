// Package stamp is the stamp format of the simulator's benchmark
// streams: a comment line, written before each write of an SSE stream, that
// carries the wall-clock time at which the simulator handed the write to
// the connection.
//
//	: tokentap-sim-sent=1767225600123456789
//
// A client on the same machine subtracts that time from the moment it read
// the event and gets the event's delivery delay on one clock, through any
// number of proxies. The format lives here, apart from the simulator, so
// that a client (the load generator) can read it without importing the
// simulator, and with it Caddy.
package stamp

import (
	"bytes"
	"strconv"
	"time"
)

// Header, set to a true value ("1", "true") on a request to the simulator,
// asks for every write of its SSE stream to be preceded by a stamp line.
// SSE comments are ignored by every SSE parser (the spec requires it), so
// SDKs and tokentap's dialects read the stamped stream exactly as the plain
// one. NDJSON and JSON-array streams have no comment syntax and
// non-streamed bodies have no events, so the simulator refuses a request
// for those with 400 rather than answer it unstamped, which would silently
// measure nothing.
const Header = "Tokentap-Sim-Stamp"

// Prefix starts a stamp line; the decimal Unix time in nanoseconds follows
// it up to the line end.
const Prefix = ": tokentap-sim-sent="

// Parse reads the send time from a stamp line, without its line end. ok is
// false for any other line, so a client can offer it every comment line of
// a stream.
func Parse(line []byte) (sent time.Time, ok bool) {
	rest, found := bytes.CutPrefix(line, []byte(Prefix))
	if !found || len(rest) == 0 || rest[0] < '0' || rest[0] > '9' {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(string(rest), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// Append appends the stamp line for sent to b, ended by CRLF when crlf is
// set and by LF otherwise: the writer ends it the way the write that
// follows ends its lines (Gemini's SSE uses CRLF), so that the stream keeps
// one line-end style.
func Append(b []byte, sent time.Time, crlf bool) []byte {
	b = append(b, Prefix...)
	b = strconv.AppendInt(b, sent.UnixNano(), 10)
	if crlf {
		return append(b, '\r', '\n')
	}
	return append(b, '\n')
}
