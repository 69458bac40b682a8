package meter

// usageParts merges usage objects that report the parts of the input count
// apart (uncached, read from the prompt cache, written to it) and
// cumulatively, as Anthropic's Messages API does, also inside Bedrock:
// semconv's input count is the sum of the parts, and an object that repeats
// only some of them (a message_delta after message_start) must keep the
// others. A part not yet reported is -1: start from newUsageParts.
type usageParts struct {
	input, cacheRead, cacheWrite int64
}

func newUsageParts() usageParts { return usageParts{input: -1, cacheRead: -1, cacheWrite: -1} }

// usageNames are one format's names for the usage fields. An empty name is
// a field the object does not have, or one not to read from it (the output
// count of Anthropic's message_start is a placeholder).
type usageNames struct {
	input, output, cacheRead, cacheWrite string
	// details is the object that breaks the output count down, and
	// reasoning its member for the reasoning (thinking) tokens.
	details, reasoning string
	// iterations is the list of the samplings one response took, each a
	// usage object with the same names and a type (anthropicIterations).
	iterations string
}

// anthropicUsage names the usage fields of Anthropic's Messages API, used
// as it is by Bedrock's model-native Anthropic payloads.
var anthropicUsage = usageNames{
	input:      "input_tokens",
	output:     "output_tokens",
	cacheRead:  "cache_read_input_tokens",
	cacheWrite: "cache_creation_input_tokens",
	// Newer models report their thinking tokens here, a part of
	// output_tokens, as recorded responses show (testdata/recorded).
	details:   "output_tokens_details",
	reasoning: "thinking_tokens",
	// The top-level counts leave out the compaction and advisor
	// samplings that usage.iterations lists (anthropicIterations).
	iterations: "iterations",
}

// read merges the usage object u, whose fields are named by names, and
// reports the usage that results, if u held any count. Negative values and
// anything but numbers are not counts.
func (p *usageParts) read(o *Observer, u string, names usageNames) {
	out := unknownUsage
	found := false
	var iterations string
	rawMembers(u, func(k, v string) bool {
		if k == names.iterations && names.iterations != "" && names.output != "" {
			iterations = v
			return true
		}
		if k == names.details && names.details != "" {
			if n, ok := rawCount(rawMember(v, names.reasoning)); ok {
				out.ReasoningOutputTokens, found = n, true
			}
			return true
		}
		n, ok := rawCount(v)
		if !ok || k == "" {
			return true
		}
		switch k {
		case names.input:
			p.input, found = n, true
		case names.cacheRead:
			p.cacheRead, found = n, true
		case names.cacheWrite:
			p.cacheWrite, found = n, true
		case names.output:
			out.OutputTokens, found = n, true
		}
		return true
	})
	if !found {
		return
	}
	if p.input >= 0 {
		out.InputTokens = p.input + max(p.cacheRead, 0) + max(p.cacheWrite, 0)
	}
	out.CacheReadInputTokens = p.cacheRead
	out.CacheCreationInputTokens = p.cacheWrite
	if rawKindOf(iterations) == kindArray {
		anthropicIterations(o, &out, iterations, names)
	}
	o.Usage(out)
}

// Anthropic's usage.iterations types. The top-level counts are the sum of
// the "message" samplings, the response model's own (on the recorded
// advisor stream and body, testdata/recorded/anthropic/advisor*); a
// "compaction" sampling is the same model summarizing the conversation,
// billed at its price but left out of the top-level counts
// (compaction.sse); an "advisor_message" is another model's sub-inference,
// billed at that model's price and left out too. A "fallback_message" is
// the hop that served the response when the requested model declined, and
// the top-level counts are already its own.
const (
	iterationMessage    = `"message"`
	iterationCompaction = `"compaction"`
	iterationAdvisor    = `"advisor_message"`
	iterationFallback   = `"fallback_message"`
)

// advisorKind is ModelUsage.Kind of an advisor's sampling, a constant so
// that recording it does not allocate.
const advisorKind = "advisor_message"

// anthropicIterations reads the iterations list of a usage object whose
// top-level counts out holds: it adds the compaction samplings to out,
// since they are the response model's and billed, and records each
// advisor sampling as another model's usage (Observer.otherModel),
// replacing what an earlier list recorded, every list being cumulative.
// An iteration of a type not known here, or a compaction or advisor one
// without its counts or model, is a counted fault: its tokens may be
// billed and are missing from the measurement.
func anthropicIterations(o *Observer, out *Usage, iterations string, names usageNames) {
	var in, outTokens, read, write int64
	var readSeen, writeSeen, compacted bool
	others := 0
	rawValues(iterations, func(it string) bool {
		var typ, model string
		i, o2, r, w := int64(-1), int64(-1), int64(-1), int64(-1)
		rawMembers(it, func(k, v string) bool {
			switch k {
			case "type":
				typ = v
			case "model":
				model = v
			case names.input:
				i = countOr(v)
			case names.output:
				o2 = countOr(v)
			case names.cacheRead:
				r = countOr(v)
			case names.cacheWrite:
				w = countOr(v)
			}
			return true
		})
		switch typ {
		case iterationMessage, iterationFallback:
		case iterationCompaction:
			if i < 0 || o2 < 0 {
				o.Degrade("usage_iteration_incomplete")
				return true
			}
			in, outTokens = in+i+max(r, 0)+max(w, 0), outTokens+o2
			if r >= 0 {
				read, readSeen = read+r, true
			}
			if w >= 0 {
				write, writeSeen = write+w, true
			}
			compacted = true
		case iterationAdvisor:
			var b rawBuf
			name, ok := rawStr(model, b[:0])
			if i < 0 || o2 < 0 || !ok || len(name) == 0 {
				o.Degrade("usage_iteration_incomplete")
				return true
			}
			if !o.otherModel(&others, name, advisorKind, ModelUsage{
				InputTokens: i + max(r, 0) + max(w, 0), OutputTokens: o2,
				CacheReadInputTokens: r, CacheCreationInputTokens: w,
			}) {
				o.Degrade("other_models_over_cap")
			}
		default:
			o.Degrade("usage_iteration_unknown")
		}
		return true
	})
	o.m.NumOtherModels = others
	if !compacted {
		return
	}
	// A count the top level left unknown stays unknown: the compaction's
	// share alone would pass for the whole.
	if out.InputTokens >= 0 {
		out.InputTokens += in
	}
	if out.OutputTokens >= 0 {
		out.OutputTokens += outTokens
	}
	if readSeen {
		out.CacheReadInputTokens = max(out.CacheReadInputTokens, 0) + read
	}
	if writeSeen {
		out.CacheCreationInputTokens = max(out.CacheCreationInputTokens, 0) + write
	}
}

// countOr is v's count, or -1 if v is not one.
func countOr(v string) int64 {
	if n, ok := rawCount(v); ok {
		return n
	}
	return -1
}
