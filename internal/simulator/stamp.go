package simulator

import (
	"net/http"
	"strings"

	"github.com/tokentap/tokentap/internal/simulator/stamp"
)

// HeaderStamp, set to a true value ("1", "true"), asks for every write of
// an SSE stream to be preceded by a stamp comment with its send time, in
// package stamp's format (which clients read without importing the
// simulator, and with it Caddy). A request for an answer that cannot carry
// SSE comments is refused (checkStamp). It is stamp.Header, named here
// too so that the simulator's request headers are all listed in one place.
const HeaderStamp = stamp.Header

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
