package simulator

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// HeaderStamp, set to a true value ("1", "true"), asks for every write of an
// SSE stream to be preceded by a comment line carrying the wall-clock time at
// which the simulator handed it to the connection:
//
//	: tokentap-sim-sent=1767225600123456789
//
// A benchmark client on the same machine subtracts that time from the
// moment it read the event and gets the event's delivery delay on one clock,
// through any number of proxies. SSE comments are ignored by every SSE
// parser (the spec requires it), so SDKs and tokentap's dialects read the
// stamped stream exactly as the plain one. NDJSON and JSON-array streams
// have no comment syntax and non-streamed bodies have no events, so a
// request for those is refused with 400 rather than answered unstamped,
// which would silently measure nothing.
const HeaderStamp = "Tokentap-Sim-Stamp"

// StampPrefix starts a stamp comment line; the decimal Unix time in
// nanoseconds follows it up to the line end.
const StampPrefix = ": tokentap-sim-sent="

// ParseStamp reads the send time from a stamp comment line, without its line
// end. ok is false for any other line, so a client can offer it every
// comment line of a stream.
func ParseStamp(line []byte) (sent time.Time, ok bool) {
	rest, found := bytes.CutPrefix(line, []byte(StampPrefix))
	if !found || len(rest) == 0 || rest[0] < '0' || rest[0] > '9' {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(string(rest), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// appendStamp appends the stamp comment for now to b, ending it the way the
// write that follows ends its lines (Gemini's SSE uses CRLF), so the stream
// keeps one line-end style.
func appendStamp(b []byte, now time.Time, crlf bool) []byte {
	b = append(b, StampPrefix...)
	b = strconv.AppendInt(b, now.UnixNano(), 10)
	if crlf {
		return append(b, '\r', '\n')
	}
	return append(b, '\n')
}

// checkStamp refuses the stamp header for an answer that cannot carry SSE
// comments: a non-streamed body, an NDJSON or a JSON-array stream.
func checkStamp(p *Plan, o overrides) error {
	if !o.stamp {
		return nil
	}
	if p.Stream && strings.HasPrefix(p.f.stream(p).contentType(), "text/event-stream") {
		return nil
	}
	return invalidRequest(http.StatusBadRequest, "", "invalid_header",
		"The %s header applies to SSE streams only; this request is answered as %s.", HeaderStamp, answerKind(p))
}

func answerKind(p *Plan) string {
	if !p.Stream {
		return "one body"
	}
	return p.f.stream(p).contentType()
}
