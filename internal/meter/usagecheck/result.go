package usagecheck

import "github.com/tokentap/tokentap/internal/meter"

// Status is what the check of one exchange found.
type Status uint8

const (
	// NotSampled: the exchange was not checked (verify_usage off, or not
	// in the sampled share).
	NotSampled Status = iota
	// Verified: the reported and counted output were compared.
	Verified
	// Unverifiable: the exchange was sampled but could not be compared;
	// Result.Reason says why. It is never a mismatch.
	Unverifiable
)

var statusNames = [...]string{"not_sampled", "verified", "unverifiable"}

// String returns the status's name.
func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "not_sampled"
}

// Why an exchange could not be verified: a closed set, for a span
// attribute and a metric dimension.
const (
	// ReasonNoTokenizer: the model's tokenizer is not known (EncodingFor).
	ReasonNoTokenizer = "no_tokenizer"
	// ReasonModelChanged: the model that answered has another tokenizer
	// than the model the text was counted for.
	ReasonModelChanged = "model_changed"
	// ReasonIncomplete: the response did not complete, so its usage, if
	// any, may not cover what was streamed.
	ReasonIncomplete = "incomplete"
	// ReasonNoUsage: the provider reported no output count.
	ReasonNoUsage = "no_usage"
	// ReasonToolCalls: the output held tool calls, whose tokens (names,
	// arguments, the provider's own framing of them) the text does not
	// show one for one.
	ReasonToolCalls = "tool_calls"
	// ReasonReasoningText: the output held shown reasoning (full or a
	// summary), which the count does not cover either.
	ReasonReasoningText = "reasoning_text"
	// ReasonNoText: no answer text was streamed.
	ReasonNoText = "no_text"
	// ReasonAPI: the API's output can hold items that the meter does not
	// hand out as text and that usage counts (the Responses API's
	// built-in web search, file search and image generation), so plain
	// text cannot be told from such output: only Chat Completions
	// (dialect openai_chat) is compared.
	ReasonAPI = "api"
)

// VerifiedDialect is the one dialect whose exchanges are compared
// (ReasonAPI).
const VerifiedDialect = "openai_chat"

// The tolerance: Reported may differ from Counted by Slack tokens plus
// one in RelativeSlack. The real recordings (TestGroundTruth) set it: on
// plain text the two agree to a token (gpt-4.1-nano: 300 of 300
// streamed, 363 against 362 in a body), and a GPT-5 model reports up to
// 10 tokens per response beyond its text and hidden reasoning (4 streamed
// tokens against 14; 1 against 11 in the Responses API), which Slack
// covers; RelativeSlack leaves room for what a longer text adds.
const (
	Slack         = 12
	RelativeSlack = 50
)

// Within reports whether reported and counted agree within the tolerance.
func Within(reported, counted int64) bool {
	d := reported - counted
	if d < 0 {
		d = -d
	}
	return d <= Slack+counted/RelativeSlack
}

// Result is the check of one exchange.
type Result struct {
	Status Status
	// Reason says why an exchange was Unverifiable.
	Reason string
	// Encoding is the tokenizer that counted, when Verified.
	Encoding string
	// Reported is the provider's output count less the reasoning it
	// reported but never streamed (meter.Measurement.StreamedOutputTokens);
	// Counted is the tokenizer's count of the answer text.
	Reported, Counted int64
	// Mismatch is set when Reported and Counted differ by more than the
	// tolerance (Within).
	Mismatch bool
}

// Result is the check of the finished measurement m, filed under model.
func (c *Checker) Result(m *meter.Measurement, model string) Result {
	if !c.Sampled() {
		return Result{}
	}
	r := Result{Status: Unverifiable}
	enc, known := EncodingFor(model)
	switch {
	case !known:
		r.Reason = ReasonNoTokenizer
	case m.Dialect != VerifiedDialect:
		r.Reason = ReasonAPI
	case m.Outcome != meter.OutcomeCompleted || m.StatusCode >= 400:
		r.Reason = ReasonIncomplete
	case m.Usage.Source != meter.UsageReported && m.Usage.Source != meter.UsageInjected || m.Usage.OutputTokens < 0:
		r.Reason = ReasonNoUsage
	case c.toolCalls:
		r.Reason = ReasonToolCalls
	case c.reasoning || m.ReasoningStreamed:
		r.Reason = ReasonReasoningText
	case !c.resolved || c.counted == 0:
		r.Reason = ReasonNoText
	case c.encoding != enc:
		r.Reason = ReasonModelChanged
	default:
		r = Result{Status: Verified, Encoding: enc, Reported: m.StreamedOutputTokens(), Counted: c.counted}
		r.Mismatch = !Within(r.Reported, r.Counted)
	}
	return r
}
