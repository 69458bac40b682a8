package meter

import "time"

// maxChoices bounds the finish reasons kept per exchange: n>1 is rare and
// small, and a hostile stream must not grow memory with huge indexes.
const maxChoices = 64

// Observer is what a Dialect reports to. Its methods are cheap and never
// allocate in steady state: strings are copied only the first time they
// appear or when they change, and well-known finish reasons are interned.
type Observer struct {
	m *Measurement
	// at is the arrival time of the event being read.
	at time.Duration
	// timed is false while reading a non-streamed body: its output arrived
	// all at once, so it has token counts but no token times.
	timed bool
	// done is set when the dialect's terminator was seen.
	done bool
	// failed is set by an error event or error body.
	failed bool
	// est counts the tokens of streams that will carry no usage (see
	// Estimator); scratch is where their text is decoded for it.
	est     Estimator
	scratch []byte
	// text receives the generated text when content capture is on (see
	// text.go); choice is the choice the dialect is reading, items counts
	// the tool calls numbered by newItem.
	text   TextSink
	choice int
	items  int
	// head is the repeated start of the stream's JSON chunks, which a
	// dialect may skip (repeatedHead).
	head repeatedHead
	// burst follows the final burst of output events, for the
	// buffered-stream rule (buffered.go).
	burst outputBurst
}

// maxTokenizedDelta bounds the delta handed to the Estimator. Counting runs
// on the delivery path, and a tokenizer's cost grows with the text it has
// not seen, so a broken or hostile stream's huge delta would hold its bytes
// back (BenchmarkTokensLongestDelta measures the longest delta allowed). Real deltas
// are a few bytes to a few hundred; one over this size is counted by the
// heuristic instead.
const maxTokenizedDelta = 4 << 10

// streamedTokens estimates the tokens of a streamed text fragment, s being
// the inside of a JSON string as written. While the stream may yet report
// usage it uses EstimateTokens, which is free; when the request did not ask
// for usage and none has come, the exact count matters and the Estimator,
// if any, reads the decoded text.
func (o *Observer) streamedTokens(s string) int64 {
	if o.est == nil || !o.timed || o.m.Request.IncludeUsage || o.m.Usage.Source == UsageReported || len(s) > maxTokenizedDelta {
		return EstimateTokens(bytesOf(s))
	}
	o.scratch = rawUnescape(o.scratch[:0], s)
	return o.est.Tokens(o.scratch)
}

// Output records generated output in the current event: tokens is the
// estimated number of tokens in it (used only when the provider reports no
// usage), visible says whether it is answer text rather than reasoning or
// tool-call arguments. Call it at most once per event.
func (o *Observer) Output(tokens int64, visible bool) {
	m := o.m
	m.EstimatedOutputTokens += tokens
	if !o.timed {
		return
	}
	m.OutputEvents++
	if m.FirstToken == 0 {
		m.FirstToken = o.at
		m.FirstEventEstimate = tokens
	}
	if visible && m.FirstVisibleToken == 0 {
		m.FirstVisibleToken = o.at
	}
	m.LastToken = o.at
	o.burst.add(o.at)
}

// identity reads the member k, "id" or "model", the names every JSON
// dialect gives the response's id and model in its chunks and bodies, or
// OpenAI's "service_tier" and "system_fingerprint". Each is copied only
// when it changes, so a value repeated in every chunk costs one copy.
func (o *Observer) identity(k, v string) {
	var b rawBuf
	s, ok := rawStr(v, b[:0])
	switch {
	case !ok:
	case k == "id":
		o.ResponseID(s)
	case k == "model":
		o.Model(s)
	case k == "service_tier":
		if len(s) > 0 && string(s) != o.m.ServiceTier {
			o.m.ServiceTier = string(s)
		}
	case k == "system_fingerprint":
		if len(s) > 0 && string(s) != o.m.SystemFingerprint {
			o.m.SystemFingerprint = string(s)
		}
	}
}

// Reasoning records that the current event carries reasoning text, in
// full or summarized. Reasoning that usage counts but the stream never
// showed was generated before the output that was shown, and this is how a
// measurement tells the two apart (see OutputTokensPerSecond).
func (o *Observer) Reasoning() { o.m.ReasoningStreamed = true }

// eventOutput sums the generated output an event's members carry, for the
// event's one Output call: readers that descend into choices, parts and
// messages add to it as they go and report it once at the event's end.
type eventOutput struct {
	tokens int64
	// any is true once a member carried output, even of no estimated
	// tokens (an inline image); visible once one carried answer text.
	any, visible bool
}

// add counts n tokens of output; visible says whether it is answer text.
func (e *eventOutput) add(n int64, visible bool) {
	e.tokens += n
	e.any = true
	e.visible = e.visible || visible
}

// merge adds what another part of the same event carried.
func (e *eventOutput) merge(f eventOutput) {
	e.tokens += f.tokens
	e.any = e.any || f.any
	e.visible = e.visible || f.visible
}

// report hands the event's output to o, if it carried any.
func (e eventOutput) report(o *Observer) {
	if e.any {
		o.Output(e.tokens, e.visible)
	}
}

// Usage merges reported counts: fields that are negative in u are left as
// they were, so providers that report input and output in different events
// (Anthropic) and providers that repeat cumulative totals (Gemini) both end
// with the last value of each field.
func (o *Observer) Usage(u Usage) {
	m := &o.m.Usage
	if u.InputTokens >= 0 {
		m.InputTokens = u.InputTokens
	}
	if u.OutputTokens >= 0 {
		m.OutputTokens = u.OutputTokens
	}
	if u.CacheReadInputTokens >= 0 {
		m.CacheReadInputTokens = u.CacheReadInputTokens
	}
	if u.CacheCreationInputTokens >= 0 {
		m.CacheCreationInputTokens = u.CacheCreationInputTokens
	}
	if u.ReasoningOutputTokens >= 0 {
		m.ReasoningOutputTokens = u.ReasoningOutputTokens
	}
	if m.Source == UsageAbsent || m.Source == UsageEstimated {
		m.Source = UsageReported
	}
}

// otherModel records u, the usage of a sampling of kind by model inside
// the exchange that is not the response model's own (ModelUsage), as the
// entries a usage object's list has recorded so far, *n of them: the
// samplings of one model and kind add up into one entry. The model's name
// is copied only when its entry held another, so a list repeated in a
// later usage object costs no copy. It returns false, recording nothing,
// when the entries are full.
func (o *Observer) otherModel(n *int, model []byte, kind string, u ModelUsage) bool {
	m := o.m
	for i := range *n {
		e := &m.OtherModels[i]
		if e.Kind == kind && e.Model == string(model) {
			e.InputTokens += u.InputTokens
			e.OutputTokens += u.OutputTokens
			e.CacheReadInputTokens = addKnown(e.CacheReadInputTokens, u.CacheReadInputTokens)
			e.CacheCreationInputTokens = addKnown(e.CacheCreationInputTokens, u.CacheCreationInputTokens)
			return true
		}
	}
	if *n >= MaxOtherModels {
		return false
	}
	e := &m.OtherModels[*n]
	if e.Model != string(model) {
		u.Model = string(model)
	} else {
		u.Model = e.Model
	}
	u.Kind = kind
	*e = u
	*n++
	return true
}

// addKnown adds two counts of which either may be unknown (negative): the
// sum of the known ones, unknown only if both are.
func addKnown(a, b int64) int64 {
	if a < 0 {
		return b
	}
	return a + max(b, 0)
}

// BilledUsage merges the counts a provider says it bills, where it reports
// them apart from the counts processed (Cohere's billed_units, which leave
// out the system preamble and cached input): negative fields are left as
// they were, as in Usage. They do not replace Usage, which gen_ai.usage.*
// report for every provider alike; the cost is priced from them
// (Measurement.Billed).
func (o *Observer) BilledUsage(b BilledUsage) {
	m := &o.m.Billed
	if b.InputTokens >= 0 {
		m.InputTokens = b.InputTokens
	}
	if b.OutputTokens >= 0 {
		m.OutputTokens = b.OutputTokens
	}
}

// Model records the response model. Empty values are ignored because some
// providers send placeholder chunks with an empty model (Azure's prompt
// filter results).
func (o *Observer) Model(b []byte) {
	if len(b) > 0 && string(b) != o.m.ResponseModel {
		o.m.ResponseModel = string(b)
	}
}

// ResponseID records the response id; empty values are ignored.
func (o *Observer) ResponseID(b []byte) {
	if len(b) > 0 && string(b) != o.m.ResponseID {
		o.m.ResponseID = string(b)
	}
}

// FinishReason records why choice index stopped.
func (o *Observer) FinishReason(index int64, reason []byte) {
	if len(reason) == 0 || index < 0 || index >= maxChoices {
		return
	}
	m := o.m
	for int64(len(m.FinishReasons)) <= index {
		m.FinishReasons = append(m.FinishReasons, "")
	}
	if string(reason) != m.FinishReasons[index] {
		m.FinishReasons[index] = intern(reason)
	}
}

// Error records an error reported inside the response. typ should be the
// provider's low-cardinality error type; empty means unknown.
func (o *Observer) Error(typ []byte) {
	o.failed = true
	if o.m.ErrorType != "" {
		return
	}
	if len(typ) == 0 || len(typ) > 64 {
		o.m.ErrorType = "_OTHER"
		return
	}
	o.m.ErrorType = intern(typ)
}

// Done records that the dialect's end-of-stream marker arrived.
func (o *Observer) Done() { o.done = true }

// ServerTiming records a timing the provider reported about its own work.
func (o *Observer) ServerTiming(name string, seconds float64) {
	m := o.m
	for i := range m.ServerTimings {
		if m.ServerTimings[i].Name == name {
			m.ServerTimings[i].Seconds = seconds
			return
		}
	}
	m.ServerTimings = append(m.ServerTimings, ServerTiming{name, seconds})
}

// Degrade records a measurement fault: the traffic is fine, the measurement
// is less complete.
func (o *Observer) Degrade(reason string) {
	o.m.Degraded++
	if o.m.DegradedReason == "" {
		o.m.DegradedReason = reason
	}
}

// interned holds the values that recur on every exchange, so recording them
// does not allocate.
var interned = map[string]string{}

func init() {
	for _, s := range []string{
		"stop", "length", "tool_calls", "content_filter", "function_call", "error",
		"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal",
		"STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "OTHER",
		"server_error", "invalid_request_error", "rate_limit_exceeded", "overloaded_error",
		"api_error", "insufficient_quota", "_OTHER",
	} {
		interned[s] = s
	}
}

func intern(b []byte) string {
	if s, ok := interned[string(b)]; ok {
		return s
	}
	return string(b)
}
