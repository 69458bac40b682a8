package meter

import (
	"math"
	"time"
)

// Outcome says how an exchange ended. Dashboards group errors by it, so the
// values are a closed set.
type Outcome uint8

const (
	// OutcomeUnknown is the zero value: the exchange has not finished.
	OutcomeUnknown Outcome = iota
	// OutcomeCompleted: the response ended with its dialect's terminator
	// (for example data: [DONE]) or, when not streamed, a complete body.
	OutcomeCompleted
	// OutcomeTruncated: the stream ended cleanly at the transport level but
	// without its terminator, so usage and finish reasons may be missing.
	OutcomeTruncated
	// OutcomeUpstreamError: an error status, an error event inside a stream,
	// or the upstream connection failing mid-response.
	OutcomeUpstreamError
	// OutcomeClientAbort: the client went away before the response ended.
	OutcomeClientAbort
	// OutcomeThrottled: the provider refused or cut the request for its
	// rate limits or its load: a 429, Anthropic's 529, or an error event
	// of a throttling type inside a stream (throttlingErrorType). Kept
	// apart from OutcomeUpstreamError because the remedy differs: a
	// throttled caller waits or asks for more quota, it has no fault to
	// fix.
	OutcomeThrottled
)

var outcomeNames = [...]string{"unknown", "completed", "truncated", "upstream_error", "client_abort", "throttled"}

// String returns the name used in telemetry (tokentap.outcome).
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// UsageSource says where token counts came from, so that an estimate is never
// mistaken for the provider's own count.
type UsageSource uint8

const (
	// UsageAbsent: no counts are known.
	UsageAbsent UsageSource = iota
	// UsageReported: the provider reported the counts in the response.
	UsageReported
	// UsageInjected: the counts were reported because tokentap asked the
	// provider for them on the client's behalf.
	UsageInjected
	// UsageEstimated: the output count was estimated from the streamed text
	// because the provider reported none.
	UsageEstimated
)

var usageSourceNames = [...]string{"absent", "reported", "injected", "estimated"}

// String returns the name used in telemetry (tokentap.usage.source).
func (s UsageSource) String() string {
	if int(s) < len(usageSourceNames) {
		return usageSourceNames[s]
	}
	return "absent"
}

// Usage is token usage in semconv's terms: InputTokens includes cached input
// tokens and OutputTokens includes reasoning tokens, whatever the provider's
// own arithmetic. A negative count means the provider did not report it.
type Usage struct {
	InputTokens              int64
	OutputTokens             int64
	CacheReadInputTokens     int64
	CacheCreationInputTokens int64
	ReasoningOutputTokens    int64
	Source                   UsageSource
}

// unknownUsage is Usage with nothing known.
var unknownUsage = Usage{-1, -1, -1, -1, -1, UsageAbsent}

// BilledUsage is what a provider says it bills, where it reports that
// apart from what the model processed: Cohere's billed_units, which leave
// out the system preamble and the cached input that Usage.InputTokens
// includes (12 billed input tokens against 507 processed, 448 of them
// cached, on a recorded Cohere stream). Usage stays what was processed, as
// for every other provider, and feeds gen_ai.usage.*; the cost is priced
// from the billed counts when both are known, since they are the bill. A
// negative count means the provider did not report it.
type BilledUsage struct {
	InputTokens  int64
	OutputTokens int64
}

// Known reports whether both billed counts were reported, the condition
// for pricing an exchange from them.
func (b BilledUsage) Known() bool { return b.InputTokens >= 0 && b.OutputTokens >= 0 }

// unknownBilled is BilledUsage with nothing known.
var unknownBilled = BilledUsage{-1, -1}

// ModelUsage is the usage of samplings inside one exchange that were not
// the response model's own: Anthropic's advisor tool runs a sub-inference
// on another model (its usage.iterations entry of type advisor_message
// names that model), billed at that model's price and left out of the
// response's top-level counts. The counts are in semconv's terms, as in
// Usage: InputTokens includes the cached reads and cache writes.
type ModelUsage struct {
	// Model is the model that sampled, as the provider names it; it may
	// be the response model itself (an advisor of the executor's own
	// model), whose counts still stay apart, having been neither
	// streamed nor timed.
	Model string
	// Kind is the provider's name for the sampling, e.g.
	// "advisor_message".
	Kind                     string
	InputTokens              int64
	OutputTokens             int64
	CacheReadInputTokens     int64
	CacheCreationInputTokens int64
}

// Usage is u as a Usage, for pricing: no reasoning count, reported.
func (u ModelUsage) Usage() Usage {
	return Usage{u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, -1, UsageReported}
}

// MaxOtherModels bounds the other models' usage kept per exchange, one
// entry per model and kind: a request names one advisor model, and a
// hostile body must not grow the measurement.
const MaxOtherModels = 4

// Request holds what the client asked for, read from the request body. Absent
// values are left at their zero value with the matching Has flag false.
type Request struct {
	Model          string
	Stream         bool
	HasStream      bool
	MaxTokens      int64
	HasMaxTokens   bool
	Temperature    float64
	HasTemperature bool
	TopP           float64
	HasTopP        bool
	// The other sampling parameters the GenAI conventions name, where the
	// API has them (request.go's samplingNames): the seed, top-k, the
	// penalties, the stop sequences (at most maxStopSequences), and how
	// many choices were asked for.
	Seed                int64
	HasSeed             bool
	TopK                float64
	HasTopK             bool
	FrequencyPenalty    float64
	HasFrequencyPenalty bool
	PresencePenalty     float64
	HasPresencePenalty  bool
	StopSequences       []string
	ChoiceCount         int64
	HasChoiceCount      bool
	// ServiceTier is OpenAI's service_tier as the client asked for it.
	ServiceTier string
	// IncludeUsage is OpenAI's stream_options.include_usage.
	IncludeUsage bool
	// Truncated is true when the body was larger than the tee's cap, so
	// fields after the cap may be missing.
	Truncated bool
}

// ServerTiming is a timing the provider reported about its own work, such as
// Ollama's eval_duration. Name becomes tokentap.server_timing.<Name>.
type ServerTiming struct {
	Name    string
	Seconds float64
}

// Measurement is everything observed about one exchange. Durations are
// offsets from Start; zero means "not observed", because nothing can arrive
// at exactly the instant the request did.
type Measurement struct {
	// Dialect is the name of the dialect that read the exchange.
	Dialect string
	// Operation is the semconv gen_ai.operation.name, e.g. "chat".
	Operation string
	// Start is when the request reached the proxy.
	Start time.Time
	// Request is what the client asked for.
	Request Request

	// StatusCode is the upstream's HTTP status (0 if none arrived).
	StatusCode int
	// Streamed is true when the response was an event stream.
	Streamed bool

	FirstByte         time.Duration // first response body byte
	FirstChunk        time.Duration // first decoded event
	FirstToken        time.Duration // first event with generated output of any kind
	FirstVisibleToken time.Duration // first event with answer text (not reasoning, not tool arguments)
	LastToken         time.Duration // last event with generated output
	End               time.Duration // when the exchange finished

	// Chunks counts decoded events (SSE events, NDJSON lines, frames).
	Chunks int64
	// MaxChunkGap is the longest time between two consecutive chunks.
	MaxChunkGap time.Duration
	// Stalls counts gaps between chunks longer than the stall threshold.
	Stalls int64
	// ChunkGaps is the distribution of the gaps between chunks, for the
	// per-chunk time_per_output_chunk histogram.
	ChunkGaps ChunkGaps
	// OutputEvents counts events that carried generated output.
	OutputEvents int64
	// EstimatedOutputTokens is the running estimate from the streamed text;
	// it becomes Usage.OutputTokens when the provider reports none.
	EstimatedOutputTokens int64
	// Buffered is true when the stream arrived held back and released in
	// one burst at its end, after a wait long against that burst
	// (outputBurst.buffered): its time to first token is the whole
	// generation and its decode rate is not the model's.
	Buffered bool
	// FirstEventEstimate is the part of EstimatedOutputTokens that came
	// with the first output event: how much of the output arrived at
	// FirstToken, which the decode rate must not count as decoded after it.
	FirstEventEstimate int64
	// ReasoningStreamed is true when some reasoning text, in full or as a
	// summary, was streamed. When it is false, the reasoning tokens that
	// usage reports were never streamed: OpenAI's reasoning models behind
	// Chat Completions and the Responses API without a summary, Gemini
	// without includeThoughts, xAI's grok-4.
	ReasoningStreamed bool

	// Usage holds the token counts and where they came from.
	Usage Usage
	// Billed holds the counts the provider bills, where it reports them
	// apart from Usage (Cohere's billed_units); -1 each otherwise. A
	// Measurement not made by a Meter must set them to -1 itself: the
	// zero value is a bill of nothing.
	Billed BilledUsage

	// OtherModels holds, in its first NumOtherModels entries, the usage of
	// samplings by models other than the response's own inside this
	// exchange (ModelUsage). It is an array so that recording it never
	// allocates but for the model's name; OtherModelUsage is the slice.
	OtherModels    [MaxOtherModels]ModelUsage
	NumOtherModels int

	ResponseModel string
	ResponseID    string
	// ServiceTier and SystemFingerprint are OpenAI's service_tier (the
	// tier that served the request: "default", "scale", "flex") and
	// system_fingerprint (the backend configuration), where the response
	// has them.
	ServiceTier       string
	SystemFingerprint string
	// FinishReasons holds one reason per choice, in choice index order.
	FinishReasons []string

	// Outcome and ErrorType say how it ended; ErrorType is a low-cardinality
	// identifier (an HTTP status like "429", a provider error type like
	// "server_error", or "_OTHER") and empty on success.
	Outcome   Outcome
	ErrorType string

	// ServerTimings are the provider's own timings, when it reports any.
	ServerTimings []ServerTiming

	// Bytes is the response body size seen.
	Bytes int64
	// Degraded counts measurement faults that cost accuracy but not traffic:
	// undecodable events, oversized events, bodies over the cap.
	Degraded int64
	// DegradedReason is the first such fault, for the log.
	DegradedReason string
}

// OtherModelUsage is the usage of the other models that sampled inside
// the exchange (OtherModels).
func (m *Measurement) OtherModelUsage() []ModelUsage {
	return m.OtherModels[:min(max(m.NumOtherModels, 0), MaxOtherModels)]
}

// OutputTokensPerSecond is the decode rate: the output tokens that arrived
// after the first output event, divided by the time from the first to the
// last output event. The first event's time is time to first token, not
// decoding, and so are the tokens it carried: one where a server streams a
// token per event, several where it streams larger pieces (Anthropic's and
// Gemini's deltas, Ollama joining the byte tokens of one character, a
// server that batches its writes). So is reasoning that usage counts but
// the stream never showed (StreamedOutputTokens). ok is false when the
// rate is undefined (no output after the first event, or no time between
// first and last).
func (m *Measurement) OutputTokensPerSecond() (rate float64, ok bool) {
	span := m.LastToken - m.FirstToken
	n := m.StreamedOutputTokens() - m.FirstEventTokens()
	if n < 1 || m.FirstToken == 0 || span <= 0 {
		return 0, false
	}
	return float64(n) / span.Seconds(), true
}

// TimePerOutputToken is the inverse of OutputTokensPerSecond, with the same
// conditions.
func (m *Measurement) TimePerOutputToken() (time.Duration, bool) {
	span := m.LastToken - m.FirstToken
	n := m.StreamedOutputTokens() - m.FirstEventTokens()
	if n < 1 || m.FirstToken == 0 || span <= 0 {
		return 0, false
	}
	return span / time.Duration(n), true
}

// StreamedOutputTokens is the part of the output count that was generated
// while the stream showed it: the output tokens less the reasoning tokens
// usage reports when no reasoning text was streamed. A model that reasons
// unseen does so before its first output event (or between built-in tool
// calls, before the answer), so those tokens belong to time to first
// token, not to the decode window; counting them there made a
// hidden-reasoning stream's rate several times too high on real
// recordings (docs/telemetry.md). Where some reasoning was streamed, even
// as a summary, the reasoning ran while the stream was showing it and all
// the output counts.
func (m *Measurement) StreamedOutputTokens() int64 {
	n := m.Usage.OutputTokens
	if r := m.Usage.ReasoningOutputTokens; r > 0 && n > 0 && !m.ReasoningStreamed {
		n -= min(r, n)
	}
	return n
}

// FirstEventTokens is how many of the streamed output tokens arrived with
// the first output event: the first event's share of the estimate, applied
// to StreamedOutputTokens. Providers report usage per response, not per
// event, so the share is the best reading of it, and taking a share rather
// than the estimate itself keeps a tokenizer that counts differently from
// the model's (or a heuristic) from skewing it. It is at least 1, since
// the event carried output, and leaves at least one token to the rest of
// the stream when it had more than one output event. It is 0 when nothing
// was streamed.
func (m *Measurement) FirstEventTokens() int64 {
	n := m.StreamedOutputTokens()
	if n < 1 {
		return 0
	}
	k := int64(1)
	if m.FirstEventEstimate > 0 && m.EstimatedOutputTokens > 0 {
		k = int64(math.Round(float64(m.FirstEventEstimate) * float64(n) / float64(m.EstimatedOutputTokens)))
	}
	if m.OutputEvents > 1 {
		k = min(k, n-1)
	}
	return max(k, 1)
}

// Duration is the time from the request's arrival to its end.
func (m *Measurement) Duration() time.Duration { return m.End }

// throttlingStatus reports whether an HTTP status says the provider
// throttled the request: 429 Too Many Requests, and Anthropic's 529,
// overloaded (source: https://docs.anthropic.com/en/api/errors). A 503
// is not: it says nothing of the caller's limits.
func throttlingStatus(status int) bool { return status == 429 || status == 529 }

// throttlingErrorType reports whether a provider's error type, from an
// error inside a response that began with 200, says the request was
// throttled: Anthropic's rate_limit_error and overloaded_error (source:
// https://docs.anthropic.com/en/api/errors, whose streams may carry them
// as an error event), OpenAI's rate_limit_exceeded, a Responses API
// failure's error code (source:
// https://platform.openai.com/docs/api-reference/responses/object),
// Bedrock's throttlingException stream event (source:
// https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html)
// and Google's RESOURCE_EXHAUSTED, the status of its 429 (source:
// https://ai.google.dev/gemini-api/docs/troubleshooting).
func throttlingErrorType(t string) bool {
	switch t {
	case "rate_limit_error", "overloaded_error", "rate_limit_exceeded", "throttlingException", "RESOURCE_EXHAUSTED":
		return true
	}
	return false
}
