package loadgen

import (
	"sync"

	"github.com/tokentap/tokentap/internal/meter/tokencount"
)

// maxOutputText caps the output text kept per request for the tokenizer's
// count: about 60,000 tokens of English, more than most caps ask for,
// while a run of hundreds of requests in flight holds tens of MiB at
// most. A longer text is not counted (Result.OutputTextCut) rather than
// counted in part, which would read as a difference.
const maxOutputText = 256 << 10

// outputTexts pools the text buffers, as the read buffers are: a run at
// hundreds of requests a second would otherwise make garbage whose
// collection is noise in what the client measures.
var outputTexts = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// keepText makes r keep its output text while it streams.
func (r *Result) keepText() {
	r.text = outputTexts.Get().(*[]byte)
	*r.text = (*r.text)[:0]
}

// appendText adds s to the kept text, if any; past maxOutputText the text
// is dropped and the request marked cut, so that memory stays bounded.
func (r *Result) appendText(s string) {
	if r.text == nil || r.OutputTextCut {
		return
	}
	if len(*r.text)+len(s) > maxOutputText {
		r.OutputTextCut = true
		*r.text = (*r.text)[:0]
		return
	}
	*r.text = append(*r.text, s...)
}

// countText counts the kept text with c when the request completed with
// usage reported, which is what the report sets it against, and gives the
// buffer back. It runs after the request's last byte was timed, so that
// the tokenizer's work delays none of its measurements.
func (r *Result) countText(c *tokencount.Counter) {
	if r.text == nil {
		return
	}
	if r.OK() && r.UsageReported && !r.OutputTextCut {
		r.TokenizerTokens, r.tokenized = int(c.Tokens(*r.text)), true
	}
	*r.text = (*r.text)[:0]
	outputTexts.Put(r.text)
	r.text = nil
}
