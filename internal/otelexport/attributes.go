package otelexport

import (
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/meter/usagecheck"
	"github.com/tokentap/tokentap/internal/sink"
)

// tokentap.* attribute keys: what the GenAI semantic conventions lack.
// docs/telemetry.md documents each; dashboards depend on these names.
const (
	attrTimeToFirstByte         = attribute.Key("tokentap.time_to_first_byte")
	attrTimeToFirstToken        = attribute.Key("tokentap.time_to_first_token")
	attrTimeToFirstVisibleToken = attribute.Key("tokentap.time_to_first_visible_token")
	attrOutputTokensPerSecond   = attribute.Key("tokentap.output_tokens_per_second")
	attrTimePerOutputToken      = attribute.Key("tokentap.time_per_output_token")
	attrChunks                  = attribute.Key("tokentap.chunks")
	attrMaxChunkGap             = attribute.Key("tokentap.max_chunk_gap")
	attrStalls                  = attribute.Key("tokentap.stalls")
	attrUsageSource             = attribute.Key("tokentap.usage.source")
	attrBilledInputTokens       = attribute.Key("tokentap.usage.billed_input_tokens")
	attrBilledOutputTokens      = attribute.Key("tokentap.usage.billed_output_tokens")
	// The usage of other models inside the exchange, one array element
	// per model (meter.ModelUsage), aligned: appendOtherModels.
	attrOtherModel               = attribute.Key("tokentap.usage.other.model")
	attrOtherKind                = attribute.Key("tokentap.usage.other.kind")
	attrOtherInputTokens         = attribute.Key("tokentap.usage.other.input_tokens")
	attrOtherOutputTokens        = attribute.Key("tokentap.usage.other.output_tokens")
	attrOtherCacheReadTokens     = attribute.Key("tokentap.usage.other.cache_read.input_tokens")
	attrOtherCacheCreationTokens = attribute.Key("tokentap.usage.other.cache_creation.input_tokens")
	attrOutcome                  = attribute.Key("tokentap.outcome")
	attrInflight                 = attribute.Key("tokentap.inflight")
	attrOverhead                 = attribute.Key("tokentap.overhead")
	attrCostUSD                  = attribute.Key("tokentap.cost.usd")
	attrSLOMet                   = attribute.Key("tokentap.slo.met")
	attrSLOSource                = attribute.Key("tokentap.slo.source")
	attrHealthState              = attribute.Key("tokentap.health.state")
	attrProbe                    = attribute.Key("tokentap.probe")
	// verify_usage's check of the reported output count (usagecheck):
	// the tokenizer's count, its encoding, and whether the two differ
	// beyond tolerance; or why a sampled exchange could not be checked.
	attrVerifiedOutputTokens = attribute.Key("tokentap.usage.verified.output_tokens")
	attrVerifiedEncoding     = attribute.Key("tokentap.usage.verified.encoding")
	attrVerifiedMismatch     = attribute.Key("tokentap.usage.verified.mismatch")
	attrUnverifiedReason     = attribute.Key("tokentap.usage.unverified.reason")
	attrUsageCheck           = attribute.Key("tokentap.usage.check")
	// attrLangfuseCompletionStart is Langfuse's own, not tokentap's:
	// Spans.Langfuse.
	attrLangfuseCompletionStart = attribute.Key("langfuse.observation.completion_start_time")
	attrDialect                 = attribute.Key("tokentap.dialect")
	attrDegraded                = attribute.Key("tokentap.degraded")
	attrDegradedReason          = attribute.Key("tokentap.degraded.reason")
	attrContentTruncated        = attribute.Key("tokentap.content.truncated")
	attrStreamBuffered          = attribute.Key("tokentap.stream.buffered")
	attrServerTimingPrefix      = "tokentap.server_timing."
	httpResponseStatusCodeKey   = attribute.Key("http.response.status_code")
)

// usageKeys are the conventions' attribute of each token count.
var usageKeys = [sink.NumTokenKinds]attribute.Key{
	sink.InputTokens:              semconv.GenAIUsageInputTokensKey,
	sink.OutputTokens:             semconv.GenAIUsageOutputTokensKey,
	sink.CacheReadInputTokens:     semconv.GenAIUsageCacheReadInputTokensKey,
	sink.CacheCreationInputTokens: semconv.GenAIUsageCacheCreationInputTokensKey,
	sink.ReasoningOutputTokens:    semconv.GenAIUsageReasoningOutputTokensKey,
}

// appendMeasurement appends the attributes a measurement defines. Values that
// were not observed are left out rather than reported as zero, so a missing
// first token is never confused with an instant one.
func appendMeasurement(attrs []attribute.KeyValue, r *sink.Result) []attribute.KeyValue {
	m := r.M
	attrs = append(attrs,
		semconv.GenAIOperationNameKey.String(m.Operation),
		attrDialect.String(m.Dialect),
		attrOutcome.String(m.Outcome.String()),
		attrUsageSource.String(m.Usage.Source.String()),
	)
	rq := &m.Request
	if rq.Model != "" {
		attrs = append(attrs, semconv.GenAIRequestModel(validUTF8(rq.Model)))
	}
	if rq.Stream {
		// semconv: set if and only if the request is streaming.
		attrs = append(attrs, semconv.GenAIRequestStream(true))
	}
	if rq.HasMaxTokens {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(int(rq.MaxTokens)))
	}
	if rq.HasTemperature {
		attrs = append(attrs, semconv.GenAIRequestTemperature(rq.Temperature))
	}
	if rq.HasTopP {
		attrs = append(attrs, semconv.GenAIRequestTopP(rq.TopP))
	}
	attrs = appendSampling(attrs, rq)
	if m.ResponseModel != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(validUTF8(m.ResponseModel)))
	}
	if m.ResponseID != "" {
		attrs = append(attrs, semconv.GenAIResponseID(validUTF8(m.ResponseID)))
	}
	attrs = appendOpenAI(attrs, r)
	if reasons := FinishReasons(m); len(reasons) > 0 {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(reasons...))
	}
	if m.StatusCode > 0 {
		attrs = append(attrs, httpResponseStatusCodeKey.Int(m.StatusCode))
	}
	if m.ErrorType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(validUTF8(m.ErrorType)))
	}

	for k, key := range usageKeys {
		if n, ok := r.Tokens(sink.TokenKind(k)); ok {
			attrs = append(attrs, key.Int64(n))
		}
	}
	// The counts the provider bills, where it reports them apart from
	// those processed (Cohere's billed_units): the cost is priced from
	// them, while gen_ai.usage.* stay the processed counts.
	if n := m.Billed.InputTokens; n >= 0 {
		attrs = append(attrs, attrBilledInputTokens.Int64(n))
	}
	if n := m.Billed.OutputTokens; n >= 0 {
		attrs = append(attrs, attrBilledOutputTokens.Int64(n))
	}

	attrs = appendOtherModels(attrs, m.OtherModelUsage())

	seconds := func(k attribute.Key, d interface{ Seconds() float64 }, ok bool) {
		if ok {
			attrs = append(attrs, k.Float64(d.Seconds()))
		}
	}
	if m.Streamed {
		seconds(semconv.GenAIResponseTimeToFirstChunkKey, m.FirstChunk, m.FirstChunk > 0)
		attrs = append(attrs, attrChunks.Int64(m.Chunks), attrStalls.Int64(m.Stalls))
		seconds(attrMaxChunkGap, m.MaxChunkGap, m.Chunks > 1)
		if m.Buffered {
			// Only when flagged, as tokentap.probe: most streams are not.
			attrs = append(attrs, attrStreamBuffered.Bool(true))
		}
	}
	seconds(attrTimeToFirstByte, m.FirstByte, m.FirstByte > 0)
	seconds(attrTimeToFirstToken, m.FirstToken, m.FirstToken > 0)
	seconds(attrTimeToFirstVisibleToken, m.FirstVisibleToken, m.FirstVisibleToken > 0)
	if rate, ok := m.OutputTokensPerSecond(); ok {
		attrs = append(attrs, attrOutputTokensPerSecond.Float64(rate))
	}
	if tpot, ok := m.TimePerOutputToken(); ok {
		seconds(attrTimePerOutputToken, tpot, true)
	}
	for _, st := range m.ServerTimings {
		attrs = append(attrs, attribute.Float64(attrServerTimingPrefix+st.Name, st.Seconds))
	}
	if m.Degraded > 0 {
		attrs = append(attrs, attrDegraded.Int64(m.Degraded), attrDegradedReason.String(m.DegradedReason))
	}
	return attrs
}

// appendOtherModels adds the usage of the models other than the response
// model's own that sampled inside the exchange (Anthropic's advisor): the
// gen_ai.usage.* attributes are the response model's, which
// gen_ai.response.model names, so another model's tokens go beside them,
// in arrays aligned element by element, one element per model and kind.
// A cache count is there only if every element reports it, since an
// array has no room for an absent value.
func appendOtherModels(attrs []attribute.KeyValue, others []meter.ModelUsage) []attribute.KeyValue {
	if len(others) == 0 {
		return attrs
	}
	models := make([]string, len(others))
	kinds := make([]string, len(others))
	counts := make([]int64, 4*len(others))
	in, out, read, write := counts[:len(others)], counts[len(others):2*len(others)], counts[2*len(others):3*len(others)], counts[3*len(others):]
	readKnown, writeKnown := true, true
	for i, o := range others {
		models[i], kinds[i] = validUTF8(o.Model), validUTF8(o.Kind)
		in[i], out[i], read[i], write[i] = o.InputTokens, o.OutputTokens, o.CacheReadInputTokens, o.CacheCreationInputTokens
		readKnown = readKnown && read[i] >= 0
		writeKnown = writeKnown && write[i] >= 0
	}
	attrs = append(attrs,
		attrOtherModel.StringSlice(models),
		attrOtherKind.StringSlice(kinds),
		attrOtherInputTokens.Int64Slice(in),
		attrOtherOutputTokens.Int64Slice(out),
	)
	if readKnown {
		attrs = append(attrs, attrOtherCacheReadTokens.Int64Slice(read))
	}
	if writeKnown {
		attrs = append(attrs, attrOtherCacheCreationTokens.Int64Slice(write))
	}
	return attrs
}

// FinishReasons is gen_ai.response.finish_reasons: one reason per choice,
// in choice order. A choice that never finished while a later one did, or
// the one choice of a response that failed or was cut after its output
// began, has "error" in its slot, so that the list stays in step with the
// choices and a failed generation shows as such; a response the client
// left has no reason for what it did not wait for.
//
// It is exported for the access log, which must list the same reasons.
func FinishReasons(m *meter.Measurement) []string {
	rs := m.FinishReasons
	if len(rs) == 0 {
		if m.FirstToken > 0 && isFailure(m) {
			return errorReason
		}
		return nil
	}
	for _, r := range rs {
		if r == "" || !utf8.ValidString(r) {
			out := make([]string, 0, len(rs))
			for _, r := range rs {
				switch {
				case r != "":
					out = append(out, validUTF8(r))
				case m.Outcome != meter.OutcomeClientAbort:
					out = append(out, "error")
				}
			}
			return out
		}
	}
	return rs
}

// errorReason is the finish reasons of a one-choice response that failed.
var errorReason = []string{"error"}

// isFailure reports whether the span's status should be Error: the exchange
// failed upstream, was throttled or was cut short. A client leaving is not
// an error of the system being measured.
func isFailure(m *meter.Measurement) bool {
	switch m.Outcome {
	case meter.OutcomeUpstreamError, meter.OutcomeThrottled, meter.OutcomeTruncated:
		return true
	}
	return false
}

func spanErrorStatus(m *meter.Measurement) (codes.Code, string) {
	return codes.Error, m.Outcome.String() + ": " + validUTF8(m.ErrorType)
}

// appendSampling adds the request's other sampling parameters, each where
// the request had it.
func appendSampling(attrs []attribute.KeyValue, rq *meter.Request) []attribute.KeyValue {
	if rq.HasSeed {
		attrs = append(attrs, semconv.GenAIRequestSeed(int(rq.Seed)))
	}
	if rq.HasTopK {
		attrs = append(attrs, semconv.GenAIRequestTopK(rq.TopK))
	}
	if rq.HasFrequencyPenalty {
		attrs = append(attrs, semconv.GenAIRequestFrequencyPenalty(rq.FrequencyPenalty))
	}
	if rq.HasPresencePenalty {
		attrs = append(attrs, semconv.GenAIRequestPresencePenalty(rq.PresencePenalty))
	}
	if rq.HasChoiceCount {
		attrs = append(attrs, semconv.GenAIRequestChoiceCount(int(rq.ChoiceCount)))
	}
	if len(rq.StopSequences) > 0 {
		stops := make([]string, len(rq.StopSequences))
		for i, s := range rq.StopSequences {
			stops[i] = validUTF8(s)
		}
		attrs = append(attrs, semconv.GenAIRequestStopSequences(stops...))
	}
	return attrs
}

// appendOpenAI adds the conventions' openai.* attributes: the API's type
// when the provider is OpenAI, and the service tier asked for and used and
// the system fingerprint wherever a request or response has them
// (OpenAI-compatible servers and Azure send them too).
func appendOpenAI(attrs []attribute.KeyValue, r *sink.Result) []attribute.KeyValue {
	m := r.M
	if r.Provider == "openai" {
		switch m.Dialect {
		case "openai_chat":
			attrs = append(attrs, semconv.OpenAIAPITypeChatCompletions)
		case "openai_responses":
			attrs = append(attrs, semconv.OpenAIAPITypeResponses)
		}
	}
	if t := m.Request.ServiceTier; t != "" {
		attrs = append(attrs, semconv.OpenAIRequestServiceTierKey.String(validUTF8(t)))
	}
	if t := m.ServiceTier; t != "" {
		attrs = append(attrs, semconv.OpenAIResponseServiceTier(validUTF8(t)))
	}
	if f := m.SystemFingerprint; f != "" {
		attrs = append(attrs, semconv.OpenAIResponseSystemFingerprint(validUTF8(f)))
	}
	return attrs
}

// appendUsageCheck appends verify_usage's check, when the exchange was
// sampled.
func appendUsageCheck(attrs []attribute.KeyValue, c *usagecheck.Result) []attribute.KeyValue {
	switch c.Status {
	case usagecheck.Verified:
		attrs = append(attrs,
			attrVerifiedOutputTokens.Int64(c.Counted),
			attrVerifiedEncoding.String(c.Encoding),
			attrVerifiedMismatch.Bool(c.Mismatch))
	case usagecheck.Unverifiable:
		attrs = append(attrs, attrUnverifiedReason.String(c.Reason))
	}
	return attrs
}
