package loadgen

import (
	"time"
)

// Error kinds of a failed request, as Result.ErrorKind and the keys of
// ModelReport.Errors. An HTTP error status is "http_" and its code.
const (
	ErrTransport   = "transport"    // the connection failed or broke mid-stream
	ErrTimeout     = "timeout"      // the request ran past Config.Timeout
	ErrCanceled    = "canceled"     // the run was stopped (its context ended)
	ErrStream      = "stream_error" // the API reported an error inside the stream
	ErrTruncated   = "truncated"    // the stream ended without the API's end marker
	ErrUnreadable  = "unreadable"   // the stream broke the SSE framing (a line over the cap)
	errHTTPPrefix  = "http_"
	maxErrorDetail = 512 // bytes of an error body kept in Result.Error
)

// Result is one request as the client saw it. Times are offsets from Start,
// the moment just before the request was handed to the HTTP client; an
// event's time is when the read that completed it returned.
type Result struct {
	// Seq is the request's number in the run, from 0.
	Seq int
	// Warmup is set on the run's first Config.Warmup requests, which the
	// report leaves out.
	Warmup bool
	Model  string
	// Group is, in a replay, the recorded request's model: what the
	// candidate's result is compared with (Planned.Group).
	Group string
	Start time.Time

	// Status is the HTTP status, 0 when none arrived.
	Status int
	// ErrorKind is "" for a request that completed, else one of the Err*
	// kinds or "http_<status>"; Error says more.
	ErrorKind string
	Error     string
	// StreamError is the message of an error event in the stream.
	StreamError string

	// ResponseID and ResponseModel are the response's id and model, as the
	// first event that carries them says.
	ResponseID    string
	ResponseModel string

	// Events counts every event of the stream; ContentEvents those that
	// carry output (text, reasoning, refusal or tool-call arguments).
	Events        int
	ContentEvents int

	// OutputTokens is the server's reported output count when
	// UsageReported, else ContentEvents (one token per event, which is how
	// servers without usage stream).
	OutputTokens  int
	UsageReported bool

	// TokenizerTokens is, when Config.Tokenizer is set and the request
	// completed with usage reported, the tokenizer's count of the output
	// text streamed (text, reasoning, refusal, tool-call arguments), to
	// set against OutputTokens; zero otherwise. OutputTextCut marks a
	// request whose text passed maxOutputText and so was not counted.
	TokenizerTokens int
	OutputTextCut   bool
	tokenized       bool    // TokenizerTokens was counted
	text            *[]byte // the output text while it streams, pooled

	// FirstToken and LastToken are when the first and last content events
	// arrived; End when the body ended.
	FirstToken time.Duration
	LastToken  time.Duration
	End        time.Duration

	// Gaps are the intervals between consecutive content events: the
	// inter-token latency the user of a chat sees. A chunk that carries
	// several tokens counts once.
	Gaps []time.Duration

	// Delays are, for a stream carrying the simulator's stamps, every
	// event's delivery delay: its arrival minus the time the upstream
	// wrote it, both read from the wall clock of the same machine. Events
	// before the first stamp have none.
	Delays []time.Duration
}

// OK reports whether the request completed: a 200 answer whose stream
// ended with the API's end marker and no error.
func (r *Result) OK() bool { return r.ErrorKind == "" }

// TimeToFirstToken is the time from sending the request to the first
// content event, or zero when none arrived.
func (r *Result) TimeToFirstToken() time.Duration {
	if r.ContentEvents == 0 {
		return 0
	}
	return r.FirstToken
}

// OutputTokensPerSecond is the decode rate after the first token:
// (output tokens - 1) / (last token - first token), which is tokentap's
// definition for the simulator's streams of one token per event. It is
// zero when undefined (fewer than two tokens, or all in one read).
func (r *Result) OutputTokensPerSecond() float64 {
	span := r.LastToken - r.FirstToken
	if r.OutputTokens < 2 || r.ContentEvents < 2 || span <= 0 {
		return 0
	}
	return float64(r.OutputTokens-1) / span.Seconds()
}

// OutputTokensPerSecondE2E is the rate the user waited for: output tokens
// over the whole request, time to first token included. Zero without
// output or an end.
func (r *Result) OutputTokensPerSecondE2E() float64 {
	if r.OutputTokens < 1 || r.End <= 0 {
		return 0
	}
	return float64(r.OutputTokens) / r.End.Seconds()
}
