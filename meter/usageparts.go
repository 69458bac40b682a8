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
}

// read merges the usage object u, whose fields are named by names, and
// reports the usage that results, if u held any count. Negative values and
// anything but numbers are not counts.
func (p *usageParts) read(o *Observer, u string, names usageNames) {
	out := unknownUsage
	found := false
	rawMembers(u, func(k, v string) bool {
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
	o.Usage(out)
}
