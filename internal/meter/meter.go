package meter

import (
	"bytes"
	"mime"
	"strconv"
	"strings"
	"time"

	"github.com/tokentap/tokentap/internal/framing/ndjson"
	"github.com/tokentap/tokentap/sse"
)

// Defaults for Options.
const (
	DefaultMaxBodySize    = 4 << 20
	DefaultStallThreshold = time.Second
)

// Options tune a Meter. Zero values mean the defaults.
type Options struct {
	// MaxEventSize caps one streamed event; larger events are skipped and
	// counted as degraded. Default sse.DefaultMaxEventSize (1 MiB).
	MaxEventSize int
	// MaxBodySize caps how much of a non-streamed body is kept to read its
	// usage. Default 4 MiB.
	MaxBodySize int
	// StallThreshold is the gap between chunks counted as a stall.
	// Default 1s.
	StallThreshold time.Duration
	// OnPanic is called with the value of a panic recovered in a dialect
	// that runs off the caller's goroutine (while decompressing a side
	// copy); the exchange then continues unmeasured. It must be safe to
	// call from any goroutine. Panics on the caller's own goroutine are the
	// caller's to recover.
	OnPanic func(any)
	// Estimator counts the output tokens of streams that will report no
	// usage; nil means EstimateTokens. See Estimator.
	Estimator Estimator
}

// Framing is how a response body is cut into pieces for the dialect.
type Framing uint8

const (
	// FramingNone: the bytes are counted, not read.
	FramingNone Framing = iota
	// FramingSSE: text/event-stream, event by event.
	FramingSSE
	// FramingNDJSON: newline-delimited JSON, line by line; each line reaches
	// Dialect.Event as an event's Data.
	FramingNDJSON
	// FramingBody: one body, kept up to the cap and read whole at the end.
	FramingBody
	// FramingCustom: the dialect's own Framer (Bedrock's binary event
	// stream, Gemini's streamed JSON array).
	FramingCustom
)

// Framer is a push decoder that a dialect provides for a framing of its
// own. Like sse.Decoder it never keeps p, never fails and never blocks; it
// hands each complete event to the emit function it was built with.
type Framer interface {
	Write(p []byte) (int, error)
	// Close ends the stream, handing out what a lenient reader would.
	Close()
	// Oversized counts events skipped for exceeding the size cap.
	Oversized() int64
}

// FramerFaults is implemented by Framers that can find a stream corrupt
// (a bad checksum in Bedrock's event stream): they stop decoding and say
// how many faults they saw and the first one's reason, which Finish counts
// as degradation.
type FramerFaults interface {
	Faults() (n int64, reason string)
}

// FramingChooser is implemented by dialects whose responses are not framed
// by their media type alone. Framing returns the framing for a response,
// and with FramingCustom a Framer that calls emit for every event, no event
// larger than maxEvent being buffered.
type FramingChooser interface {
	Framing(status int, mediaType string, maxEvent int, emit func(*sse.Event)) (Framing, Framer)
}

// DefaultFraming is the framing a media type implies: event streams and
// NDJSON are streamed, JSON and every error status are read whole.
func DefaultFraming(status int, mediaType string) Framing {
	switch {
	case mediaType == "text/event-stream":
		return FramingSSE
	case mediaType == "application/x-ndjson" || mediaType == "application/jsonl" || mediaType == "application/json-seq":
		return FramingNDJSON
	case mediaType == "application/json" || strings.HasSuffix(mediaType, "+json") || status >= 400:
		return FramingBody
	}
	return FramingNone
}

// Meter measures one exchange. Use it from one goroutine at a time: the
// request's. The zero value is not usable; call Init or New.
type Meter struct {
	// M is the measurement being built; complete after Finish.
	M Measurement

	opts      Options
	dialect   Dialect
	obs       Observer
	framing   Framing
	dec       sse.Decoder
	lines     ndjson.Decoder
	framer    Framer
	tap       *tap      // decompresses a compressed body on its own goroutine
	line      sse.Event // the event an NDJSON line is handed out in
	body      []byte
	overCap   bool
	lastChunk time.Duration
	lastWrite time.Duration
	finished  bool
	abandoned bool
	// tapOverflow is set on the caller's goroutine when the decompressor
	// fell too far behind; it is merged at Finish.
	tapOverflow bool
}

// New returns a Meter for one exchange that started at start.
func New(d Dialect, opts Options, start time.Time) *Meter {
	mt := new(Meter)
	mt.Init(d, opts, start)
	return mt
}

// Init prepares mt for a new exchange, so a Meter can live inside a larger
// per-request struct without a separate allocation.
func (mt *Meter) Init(d Dialect, opts Options, start time.Time) {
	if opts.MaxEventSize <= 0 {
		opts.MaxEventSize = sse.DefaultMaxEventSize
	}
	if opts.MaxBodySize <= 0 {
		opts.MaxBodySize = DefaultMaxBodySize
	}
	if opts.StallThreshold <= 0 {
		opts.StallThreshold = DefaultStallThreshold
	}
	*mt = Meter{opts: opts, dialect: d}
	mt.M.Start = start
	mt.M.Dialect = d.Name()
	mt.M.Usage = unknownUsage
	mt.M.Billed = unknownBilled
	mt.obs = Observer{m: &mt.M, timed: true, est: opts.Estimator}
	mt.dec.MaxEventSize = opts.MaxEventSize
	mt.dec.ErrorField = true
	mt.dec.OnEvent = mt.onEvent
	mt.lines.MaxLineSize = opts.MaxEventSize
	mt.lines.OnLine = mt.onLine
}

// Options returns the options the Meter was set up with.
func (mt *Meter) Options() Options { return mt.opts }

// Dialect returns the dialect reading this exchange.
func (mt *Meter) Dialect() Dialect { return mt.dialect }

// Observer returns the observer that dialects report to. Callers outside a
// dialect use it to record what they learn elsewhere, such as a fault.
func (mt *Meter) Observer() *Observer { return &mt.obs }

// Request reads the client's parameters from the request body (or the first
// part of it, with truncated set, when it exceeded the tee's cap).
func (mt *Meter) Request(path string, body []byte, truncated bool) {
	mt.M.Operation = mt.dialect.Operation(path)
	mt.dialect.Request(&mt.M.Request, path, body)
	mt.M.Request.Truncated = truncated
}

// mediaTypeOf is the media type of a Content-Type value, lower case: as
// mime.ParseMediaType reads it, or the whole value trimmed when that
// fails. Without parameters both are the value trimmed and lowered, so
// only a value with parameters is parsed: the parser's map of them is an
// allocation per request.
func mediaTypeOf(contentType string) string {
	if strings.IndexByte(contentType, ';') >= 0 {
		if mt, _, err := mime.ParseMediaType(contentType); err == nil {
			return mt
		}
	}
	return strings.ToLower(strings.TrimSpace(contentType))
}

// Response records the response status and headers and chooses how the body
// will be read: an event stream event by event, a JSON body whole at the
// end, anything else only counted.
func (mt *Meter) Response(status int, contentType, contentEncoding string) {
	mt.M.StatusCode = status
	mediaType := mediaTypeOf(contentType)
	if fc, ok := mt.dialect.(FramingChooser); ok {
		mt.framing, mt.framer = fc.Framing(status, mediaType, mt.opts.MaxEventSize, mt.onEvent)
		if mt.framing == FramingCustom && mt.framer == nil {
			mt.framing = FramingNone
		}
	} else {
		mt.framing = DefaultFraming(status, mediaType)
	}
	switch mt.framing {
	case FramingSSE, FramingNDJSON, FramingCustom:
		mt.M.Streamed = true
	}
	if coding, several := normalizeEncoding(contentEncoding); coding != "" && mt.framing != FramingNone {
		if several || !supportedEncoding(coding) {
			mt.obs.Degrade("content_encoding")
			mt.framing = FramingNone
			return
		}
		// The client gets the compressed bytes; the meter reads a
		// decompressed side copy.
		mt.tap = startTap(coding, mt.frame, mt.tapFault, mt.tapPanic)
	}
}

// ResponseHeader hands the response's header to a dialect that reads it
// (HeaderReader); others ignore it, at no cost. Call it before Response,
// which may start reading the body on another goroutine.
func (mt *Meter) ResponseHeader(h Header) {
	if hr, ok := mt.dialect.(HeaderReader); ok && h != nil {
		hr.ResponseHeader(&mt.obs, h)
	}
}

func (mt *Meter) tapFault(reason string) { mt.obs.Degrade(reason) }

func (mt *Meter) tapPanic(rec any) {
	mt.abandoned = true
	mt.obs.Degrade("internal_panic")
	if mt.opts.OnPanic != nil {
		mt.opts.OnPanic(rec)
	}
}

// Write feeds response body bytes that arrived at time at. It never keeps p.
func (mt *Meter) Write(p []byte, at time.Time) {
	if len(p) == 0 || mt.finished {
		return
	}
	off := at.Sub(mt.M.Start)
	if off <= 0 {
		off = 1
	}
	if mt.M.FirstByte == 0 {
		mt.M.FirstByte = off
	}
	mt.M.Bytes += int64(len(p))
	if mt.tap != nil {
		if mt.tap.write(p, off) {
			mt.tapOverflow = true
		}
		return
	}
	mt.frame(p, off)
}

// frame cuts body bytes that arrived at off into the dialect's pieces. With
// a compressed body it runs on the tap's goroutine, which then owns the
// measurement until Finish waits for it.
func (mt *Meter) frame(p []byte, off time.Duration) {
	mt.obs.at = off
	mt.lastWrite = off
	switch mt.framing {
	case FramingSSE:
		mt.dec.Write(p)
	case FramingNDJSON:
		mt.lines.Write(p)
	case FramingCustom:
		mt.framer.Write(p)
	case FramingBody:
		if mt.overCap {
			return
		}
		if len(mt.body)+len(p) > mt.opts.MaxBodySize {
			mt.overCap = true
			mt.body = nil
			mt.obs.Degrade("body_over_cap")
			return
		}
		mt.body = append(mt.body, p...)
	}
}

func (mt *Meter) onLine(line []byte) {
	mt.line.Data = line
	mt.onEvent(&mt.line)
	mt.line.Data = nil
}

func (mt *Meter) onEvent(ev *sse.Event) {
	m := &mt.M
	at := mt.obs.at
	if m.Chunks == 0 {
		m.FirstChunk = at
	} else {
		gap := at - mt.lastChunk
		if gap > m.MaxChunkGap {
			m.MaxChunkGap = gap
		}
		if gap > mt.opts.StallThreshold {
			m.Stalls++
		}
		m.ChunkGaps.add(gap)
	}
	mt.lastChunk = at
	m.Chunks++
	if isDoneMarker(ev.Data) {
		if _, ok := mt.dialect.(DoneTerminated); !ok {
			// OpenAI's terminator, which OpenAI-style servers and
			// gateways also put after other dialects' streams
			// (OpenRouter's Responses API): an event like any other, but
			// neither a fault nor an end. Only the dialect's own
			// terminator says whether the stream completed.
			return
		}
	}
	mt.dialect.Event(&mt.obs, ev)
}

// DoneTerminated is implemented by a dialect whose streams end with the
// event "data: [DONE]" (OpenAI's Chat Completions): the Meter hands that
// event to it. No other dialect sees one.
type DoneTerminated interface {
	DoneTerminated()
}

// isDoneMarker reports whether an event's data is [DONE], spaces around it
// allowed.
func isDoneMarker(data []byte) bool {
	return len(data) < 16 && bytes.Equal(bytes.TrimSpace(data), doneMarker)
}

// Finish completes the measurement at time at. abort is OutcomeUnknown when
// the response ended normally, or OutcomeClientAbort / OutcomeUpstreamError
// when the transport broke; errorType then says why, if known. Finish is
// idempotent: later calls return the same measurement.
func (mt *Meter) Finish(at time.Time, abort Outcome, errorType string) *Measurement {
	m := &mt.M
	if mt.finished {
		return m
	}
	if mt.tap != nil {
		// Wait for the decompressor to read what is left; after this the
		// measurement is the caller's again.
		mt.tap.close()
		mt.tap = nil
		if mt.tapOverflow {
			mt.obs.Degrade("decompress_backlog")
		}
		if mt.abandoned {
			// The dialect panicked on the tap's goroutine.
			mt.framing = FramingNone
			mt.body = nil
		}
	}
	// An event still pending at the end (llama.cpp's [DONE] without its
	// blank line, an NDJSON line without its newline) arrived with the
	// last write, not at the end.
	mt.obs.at = mt.lastWrite
	var oversized int64
	switch mt.framing {
	case FramingSSE:
		mt.dec.Close()
		oversized = mt.dec.Stats().Oversized
	case FramingNDJSON:
		mt.lines.Close()
		oversized = mt.lines.Stats().Oversized
	case FramingCustom:
		mt.framer.Close()
		oversized = mt.framer.Oversized()
		if ff, ok := mt.framer.(FramerFaults); ok {
			if n, reason := ff.Faults(); n > 0 {
				m.Degraded += n
				if m.DegradedReason == "" {
					m.DegradedReason = reason
				}
			}
		}
	case FramingBody:
		if !mt.overCap && len(mt.body) > 0 {
			mt.obs.timed = false
			mt.dialect.Body(&mt.obs, mt.body)
		}
		mt.body = nil
	}
	if oversized > 0 {
		m.Degraded += oversized
		if m.DegradedReason == "" {
			m.DegradedReason = "event_over_cap"
		}
	}
	mt.finished = true
	m.End = at.Sub(m.Start)
	m.Buffered = m.Streamed && mt.obs.burst.buffered(m.OutputEvents)

	switch {
	case mt.abandoned && abort == OutcomeUnknown && m.StatusCode < 400:
		m.Outcome = OutcomeUnknown
	case abort == OutcomeClientAbort && mt.obs.done && !mt.obs.failed:
		// The client left after the terminator reached it, as the official
		// SDKs do: they close the response on data: [DONE], often before
		// the proxy has read the upstream's end. The answer was whole.
		m.Outcome = OutcomeCompleted
	case abort != OutcomeUnknown:
		m.Outcome = abort
		if abort == OutcomeUpstreamError && m.ErrorType == "" {
			m.ErrorType = errorType
			if m.ErrorType == "" {
				m.ErrorType = "_OTHER"
			}
		}
	case m.StatusCode >= 400:
		m.Outcome = OutcomeUpstreamError
		if throttlingStatus(m.StatusCode) {
			m.Outcome = OutcomeThrottled
		}
		// The status is the stable, low-cardinality name for an HTTP
		// failure; a provider type from the body is finer but varies.
		m.ErrorType = strconv.Itoa(m.StatusCode)
	case errorType != "":
		m.Outcome = OutcomeUpstreamError
		m.ErrorType = errorType
	case mt.obs.failed:
		m.Outcome = OutcomeUpstreamError
		if throttlingErrorType(m.ErrorType) {
			m.Outcome = OutcomeThrottled
		}
	case m.Streamed && !mt.obs.done:
		m.Outcome = OutcomeTruncated
		m.ErrorType = "truncated"
	default:
		m.Outcome = OutcomeCompleted
	}

	// An estimate is better than nothing, but never on an error status:
	// those bodies hold no generated text and must not show fake counts.
	// When the output count is the estimate, the source says so even if
	// the provider reported the input (a stream cut before its final usage):
	// the output count is what throughput is computed from.
	if m.Usage.OutputTokens < 0 && m.StatusCode < 400 && m.EstimatedOutputTokens > 0 {
		m.Usage.OutputTokens = m.EstimatedOutputTokens
		m.Usage.Source = UsageEstimated
	}
	return m
}

// Abandon stops reading the exchange after a fault in the dialect: nothing
// more is fed to it, and Finish reports only what the transport says, with
// the outcome left unknown unless the transport failed.
func (mt *Meter) Abandon() {
	if mt.tap != nil {
		mt.tap.close()
		mt.tap = nil
	}
	mt.abandoned = true
	mt.framing = FramingNone
	mt.body = nil
}

// Finished reports whether Finish has been called.
func (mt *Meter) Finished() bool { return mt.finished }
