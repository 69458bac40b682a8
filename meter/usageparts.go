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
	// usage object with the same names, when the top-level counts are
	// only the last sampling's (Anthropic's server-side compaction: the
	// summary is sampled first, on the whole conversation).
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
	// With compaction the top-level counts leave out the compaction
	// sampling; Anthropic bills the sum over usage.iterations
	// (docs/telemetry.md, testdata/recorded/anthropic/compaction.sse).
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
		sumIterations(&out, iterations, names)
	}
	o.Usage(out)
}

// sumIterations replaces out's input, output and cache counts with their
// sums over the iterations list, when every iteration reports input and
// output: one that does not would make the sum an undercount, and the
// top-level counts are then left as the provider gave them.
func sumIterations(out *Usage, iterations string, names usageNames) {
	var in, outTokens, read, write int64
	n, complete := 0, true
	rawValues(iterations, func(it string) bool {
		i, okIn := rawCount(rawMember(it, names.input))
		o, okOut := rawCount(rawMember(it, names.output))
		if !okIn || !okOut {
			complete = false
			return false
		}
		r, _ := rawCount(rawMember(it, names.cacheRead))
		w, _ := rawCount(rawMember(it, names.cacheWrite))
		in, outTokens, read, write = in+i+r+w, outTokens+o, read+r, write+w
		n++
		return true
	})
	if n == 0 || !complete {
		return
	}
	out.InputTokens, out.OutputTokens = in, outTokens
	out.CacheReadInputTokens, out.CacheCreationInputTokens = read, write
}
