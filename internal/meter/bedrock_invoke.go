package meter

import (
	"strconv"

	"github.com/tidwall/gjson"
)

// InvokeModel and InvokeModelWithResponseStream carry each model family's
// own JSON: a whole body, or one JSON object per streamed chunk (base64 in
// the chunk's "bytes"). The family is told by the object's members, not by
// the model id in the path, which an inference profile or a provisioned or
// imported model's ARN does not spell out. docs/telemetry.md ("Bedrock
// InvokeModel, family by family") lists what is read from each family and
// what is not, and why; the shapes are those of AWS's "Inference request
// parameters and response fields for foundation models", checked against
// the recordings of testdata/recorded/bedrock.
//
// Counts have three sources, and the first that has a count wins, field by
// field:
//
//  1. the model's own counts in its JSON (Claude's usage, Nova's usage,
//     Titan's inputTextTokenCount and tokenCount, Llama's
//     prompt_token_count and generation_token_count, the OpenAI-shaped
//     families' usage, Jurassic-2's token lists): what the model processed
//     and emitted, and, for Claude, the count anthropic_messages reports for
//     the same model;
//  2. Bedrock's amazon-bedrock-invocationMetrics, on the last chunk of
//     every stream;
//  3. the response headers X-Amzn-Bedrock-Input-Token-Count,
//     -Output-Token-Count, -Cache-Read-Input-Token-Count and
//     -Cache-Write-Input-Token-Count, which Bedrock sends with a whole body.
//
// Bedrock's counts usually equal the model's. Where they differ the model's
// win: they are what the stream carried, so the decode rate is computed on
// them, and Bedrock's own count of the same request not streamed sides with
// them on the recordings (docs/telemetry.md, TestRecordedBedrockInvoke).

// invokeMembers are the top-level members of one model-native object that
// some family reads, gathered in one pass (member), so that the object is
// walked once whatever its family. Each is the raw value, "" when absent.
type invokeMembers struct {
	// Claude's Messages events and Message bodies (also type, index,
	// message, delta, usage, error, content_block, which other families
	// share: Titan's index, Nova's and the OpenAI shape's usage, an error
	// body's message).
	claude anthropicEvent
	// metrics is amazon-bedrock-invocationMetrics.
	metrics string
	// completion is Claude's Text Completions text; stopReason is its and
	// Llama's stop_reason.
	completion, stopReason string
	// Meta Llama.
	generation, promptTokens, generationTokens string
	// Amazon Nova: the Converse-shaped event a chunk holds and its name,
	// or a whole body's output and stopReason.
	novaType, nova, output, novaStop string
	// Amazon Titan Text.
	outputText, completionReason, inputTextTokens, totalOutputTokens, results string
	// Mistral's text completion.
	outputs string
	// The OpenAI Chat Completions shape (Mistral Large 2407 and later,
	// DeepSeek, OpenAI's gpt-oss, AI21 Jamba, Qwen, Writer, imported
	// models).
	choices string
	// Cohere Command and Command R.
	generations, text, finishReason, eventType, isFinished, toolCallDelta, id, responseID string
	// AI21 Jurassic-2.
	completions, prompt string
	// noText is set by members of shapes that hold no generated text:
	// embeddings and images.
	noText bool
	// errMessage is an error body's "Message" (the lower-case one is
	// claude.message).
	errMessage string
}

// member keeps k's value if a family reads it; it always returns true.
func (c *invokeMembers) member(k, v string) bool {
	switch k {
	case "amazon-bedrock-invocationMetrics":
		c.metrics = v
	case "completion":
		c.completion = v
	case "stop_reason":
		c.stopReason = v
	case "generation":
		c.generation = v
	case "prompt_token_count":
		c.promptTokens = v
	case "generation_token_count":
		c.generationTokens = v
	case "messageStart", "contentBlockStart", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata":
		c.novaType, c.nova = k, v
	case "output":
		c.output = v
	case "stopReason":
		c.novaStop = v
	case "outputText":
		c.outputText = v
	case "completionReason":
		c.completionReason = v
	case "inputTextTokenCount":
		c.inputTextTokens = v
	case "totalOutputTextTokenCount":
		c.totalOutputTokens = v
	case "results":
		c.results = v
	case "outputs":
		c.outputs = v
	case "choices":
		c.choices = v
	case "generations":
		c.generations = v
	case "text":
		c.text = v
	case "finish_reason":
		c.finishReason = v
	case "event_type":
		c.eventType = v
	case "is_finished":
		c.isFinished = v
	case "tool_call_delta":
		c.toolCallDelta = v
	case "id":
		c.id = v
	case "response_id":
		c.responseID = v
	case "completions":
		c.completions = v
	case "prompt":
		c.prompt = v
	case "embedding", "embeddings", "images":
		c.noText = true
	case "Message":
		c.errMessage = v
	default:
		c.claude.member(k, v)
	}
	return true
}

// invokeFamily is a model family's JSON shape.
type invokeFamily uint8

const (
	familyUnknown invokeFamily = iota
	familyClaude
	familyClaudeText
	familyNova
	familyTitan
	familyLlama
	familyMistral
	familyChat
	familyCohere
	familyJurassic
	familyNoText
	familyError
	familyMetrics
)

// family tells the shape from the members present. The order matters only
// for members two families share, which none of the tests before it has.
func (c *invokeMembers) family() invokeFamily {
	switch {
	case c.novaType != "" || c.output != "":
		return familyNova
	case c.choices != "":
		return familyChat
	case c.outputs != "":
		return familyMistral
	case c.generation != "":
		return familyLlama
	case c.outputText != "" || c.results != "" || c.inputTextTokens != "" || c.totalOutputTokens != "" || c.completionReason != "":
		return familyTitan
	case c.generations != "" || c.isFinished != "" || c.eventType != "" || c.text != "":
		return familyCohere
	case c.completions != "":
		return familyJurassic
	case c.completion != "" || c.claude.typ == `"completion"`:
		return familyClaudeText
	case c.claude.typ != "":
		return familyClaude
	case c.noText:
		return familyNoText
	case rawKindOf(c.claude.message) == kindString || c.errMessage != "":
		return familyError
	case c.metrics != "":
		return familyMetrics
	}
	return familyUnknown
}

// novaUsage names the usage fields of Nova's InvokeModel bodies and
// metadata chunks: Converse's input and output names, but the cache counts
// named as in the invocation metrics (recorded; Converse says
// cacheReadInputTokens).
var novaUsage = usageNames{input: "inputTokens", output: "outputTokens", cacheRead: "cacheReadInputTokenCount", cacheWrite: "cacheWriteInputTokenCount"}

// converseUsage names the usage fields of Converse, which Nova's
// InvokeModel usage may also carry.
var converseUsage = usageNames{input: "inputTokens", output: "outputTokens", cacheRead: "cacheReadInputTokens", cacheWrite: "cacheWriteInputTokens"}

// readNative reads one model-native streamed chunk, whatever its family;
// its last chunk's invocation metrics give Bedrock's counts, two server
// timings, and the end of the stream.
func (b *bedrock) readNative(o *Observer, s string) {
	var c invokeMembers
	rawMembers(s, c.member)
	switch c.family() {
	case familyClaude:
		c.claude.read(o, &b.usage, nil)
		b.markClaudeEvent(&c.claude)
	case familyClaudeText:
		b.readClaudeText(o, &c)
	case familyNova:
		b.readNovaEvent(o, &c)
	case familyTitan:
		b.readTitan(o, &c)
	case familyLlama:
		b.readLlama(o, &c)
	case familyMistral:
		readMistralOutputs(o, c.outputs)
	case familyChat:
		b.readChat(o, s, &c)
	case familyCohere:
		b.readCohere(o, &c)
	case familyJurassic:
		b.readJurassic(o, &c)
	case familyNoText, familyMetrics:
	default:
		// An object of no known family: its text and counts are lost,
		// which the measurement must say (the invocation metrics, if
		// any, still give the counts).
		o.Degrade("invoke_chunk_unknown")
	}
	if rawKindOf(c.metrics) == kindObject {
		b.readInvocationMetrics(o, c.metrics)
		o.Done()
	}
}

// readInvokeBody reads a whole InvokeModel body, or an error body.
func (b *bedrock) readInvokeBody(o *Observer, s string) {
	var c invokeMembers
	rawMembers(s, c.member)
	switch c.family() {
	case familyClaude:
		// Claude's own Message, or its error object, read as the
		// Messages API's.
		anthropicBody(o, &b.usage, s)
		b.markSet(c.claude.usage, anthropicUsage)
	case familyClaudeText:
		b.readClaudeText(o, &c)
	case familyNova:
		b.readConverseBody(o, gjson.Parse(s))
		if rawKindOf(c.claude.usage) == kindObject {
			b.markSet(c.claude.usage, converseUsage)
			b.readUsage(o, c.claude.usage, novaUsage)
			b.markSet(c.claude.usage, novaUsage)
		}
	case familyTitan:
		b.readTitan(o, &c)
	case familyLlama:
		b.readLlama(o, &c)
	case familyMistral:
		readMistralOutputs(o, c.outputs)
	case familyChat:
		b.readChat(o, s, &c)
	case familyCohere:
		b.readCohere(o, &c)
	case familyJurassic:
		b.readJurassic(o, &c)
	case familyError:
		bedrockErrorBody(o, gjson.Parse(s))
	case familyNoText, familyMetrics:
	default:
		if o.m.StatusCode < 400 {
			// A body of no known family: its counts come from the
			// headers at best, and its text is not estimated.
			o.Degrade("invoke_body_unknown")
		}
	}
	if rawKindOf(c.metrics) == kindObject {
		b.readInvocationMetrics(o, c.metrics)
	}
}

// modelSet records which counts the model's own JSON gave, so that
// Bedrock's counts (the invocation metrics, the headers) fill only the
// others.
type modelSet struct {
	in, out, read, write bool
}

// markSet records the counts a usage object read with names holds.
func (b *bedrock) markSet(u string, names usageNames) {
	if rawKindOf(u) != kindObject {
		return
	}
	rawMembers(u, func(k, v string) bool {
		if _, ok := rawCount(v); !ok || k == "" {
			return true
		}
		switch k {
		case names.input:
			b.set.in = true
		case names.output:
			b.set.out = true
		case names.cacheRead:
			b.set.read = true
		case names.cacheWrite:
			b.set.write = true
		}
		return true
	})
}

// markClaudeEvent records the counts a Claude event gave: message_start's
// input parts (its output count is a placeholder) or message_delta's.
func (b *bedrock) markClaudeEvent(e *anthropicEvent) {
	switch e.typ {
	case `"message_start"`:
		names := anthropicUsage
		names.output = ""
		b.markSet(rawMember(e.message, "usage"), names)
	case `"message_delta"`:
		b.markSet(e.usage, anthropicUsage)
	}
}

// modelCounts merges counts the model's own JSON gives, -1 for one it does
// not: they win over Bedrock's.
func (b *bedrock) modelCounts(o *Observer, in, out int64) {
	u := unknownUsage
	found := false
	if in >= 0 {
		b.usage.input, b.set.in, found = in, true, true
	}
	if out >= 0 {
		u.OutputTokens, b.set.out, found = out, true, true
	}
	if found {
		b.reportParts(o, u)
	}
}

// fallbackCounts merges Bedrock's counts (the invocation metrics, the
// headers), -1 for one it does not give, into the fields the model's own
// counts have not given.
func (b *bedrock) fallbackCounts(o *Observer, in, out, read, write int64) {
	p := &b.usage
	u := unknownUsage
	found := false
	if in >= 0 && !b.set.in {
		p.input, found = in, true
	}
	if read >= 0 && !b.set.read {
		p.cacheRead, found = read, true
	}
	if write >= 0 && !b.set.write {
		p.cacheWrite, found = write, true
	}
	if out >= 0 && !b.set.out {
		u.OutputTokens, found = out, true
	}
	if found {
		b.reportParts(o, u)
	}
}

// reportParts reports u with the input parts kept so far: the input is
// their sum, as for Claude's usage (AWS's counts leave the cache out of
// the input count, as Anthropic's do).
func (b *bedrock) reportParts(o *Observer, u Usage) {
	p := &b.usage
	if p.input >= 0 {
		u.InputTokens = p.input + max(p.cacheRead, 0) + max(p.cacheWrite, 0)
	}
	u.CacheReadInputTokens, u.CacheCreationInputTokens = p.cacheRead, p.cacheWrite
	o.Usage(u)
}

// readInvocationMetrics reads amazon-bedrock-invocationMetrics: Bedrock's
// own counts, used where the model's JSON gave none (inputTokenCount, as
// the model's own input counts, leaves the cache counts out), and its
// latencies in ms: firstByteLatency is Bedrock's own time to first token.
func (b *bedrock) readInvocationMetrics(o *Observer, m string) {
	in, out, read, write := int64(-1), int64(-1), int64(-1), int64(-1)
	rawMembers(m, func(k, v string) bool {
		switch k {
		case "inputTokenCount", "outputTokenCount", "cacheReadInputTokenCount", "cacheWriteInputTokenCount":
			n, ok := rawCount(v)
			if !ok {
				return true
			}
			switch k {
			case "inputTokenCount":
				in = n
			case "outputTokenCount":
				out = n
			case "cacheReadInputTokenCount":
				read = n
			default:
				write = n
			}
		case "invocationLatency":
			if f, ok := rawFloat(v); ok {
				o.ServerTiming("invocation_latency", f/1000)
			}
		case "firstByteLatency":
			if f, ok := rawFloat(v); ok {
				o.ServerTiming("first_byte_latency", f/1000)
			}
		}
		return true
	})
	b.fallbackCounts(o, in, out, read, write)
}

// The response headers in which Bedrock reports an InvokeModel's (and a
// Converse's) counts and latency with a whole body; a stream's headers
// have none, its counts come in its last chunk.
const (
	bedrockInputHeader      = "X-Amzn-Bedrock-Input-Token-Count"
	bedrockOutputHeader     = "X-Amzn-Bedrock-Output-Token-Count"
	bedrockCacheReadHeader  = "X-Amzn-Bedrock-Cache-Read-Input-Token-Count"
	bedrockCacheWriteHeader = "X-Amzn-Bedrock-Cache-Write-Input-Token-Count"
	bedrockLatencyHeader    = "X-Amzn-Bedrock-Invocation-Latency"
)

// ResponseHeader implements HeaderReader: Bedrock's counts in the response
// headers are the last fallback, for the fields that neither the model's
// JSON nor the invocation metrics give (Cohere's, Mistral's and Claude
// Text Completions' bodies carry no counts at all). They are merged now,
// before the body, so that a body that is never read (over the size cap)
// keeps them; whatever the body or the metrics give replaces them.
func (b *bedrock) ResponseHeader(o *Observer, h Header) {
	b.fallbackCounts(o, headerCount(h, bedrockInputHeader), headerCount(h, bedrockOutputHeader),
		headerCount(h, bedrockCacheReadHeader), headerCount(h, bedrockCacheWriteHeader))
	if v := h.Get(bedrockLatencyHeader); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			o.ServerTiming("invocation_latency", ms/1000)
		}
	}
}

// headerCount is a header's count, -1 when absent or not a count.
func headerCount(h Header, name string) int64 {
	v := h.Get(name)
	if v == "" {
		return -1
	}
	n, ok := rawParseInt(v)
	if !ok || n < 0 {
		return -1
	}
	return n
}

// readClaudeText reads Claude's Text Completions (Claude 2 and Instant):
// completion is the text, stop_reason why it stopped. It reports no
// counts: Bedrock's metrics and headers give them.
func (b *bedrock) readClaudeText(o *Observer, c *invokeMembers) {
	if t, ok := rawText(c.completion); ok && t != "" {
		o.Output(estimateText(bytesOf(t)), true)
		o.emit(0, TextAnswer, c.completion)
	}
	invokeFinish(o, 0, c.stopReason)
}

// invokeFinish records a choice's finish reason from its raw value; a string
// reason also ends the generation, which the last chunk's metrics then only
// report on. It reports whether there was one.
func invokeFinish(o *Observer, index int64, raw string) bool {
	var buf rawBuf
	r, ok := rawStr(raw, buf[:0])
	if !ok || len(r) == 0 {
		return false
	}
	o.FinishReason(index, r)
	o.Done()
	return true
}

// readNovaEvent reads one of Nova's streamed events, which are
// ConverseStream's events wrapped in an object named by the event's type
// ({"contentBlockDelta":{...}}), and read as ConverseStream's are. The
// metadata event's usage names the cache counts as the invocation metrics
// do.
func (b *bedrock) readNovaEvent(o *Observer, c *invokeMembers) {
	if c.novaType == "" {
		o.Degrade("invoke_chunk_unknown")
		return
	}
	b.readConverseEvent(o, bytesOf(c.novaType), c.nova)
	if c.novaType == "metadata" {
		u := rawMember(c.nova, "usage")
		if rawKindOf(u) == kindObject {
			b.markSet(u, converseUsage)
			b.readUsage(o, u, novaUsage)
			b.markSet(u, novaUsage)
		}
	}
}

// readTitan reads Titan Text: a chunk's outputText, its index, and on the
// last chunk completionReason and totalOutputTextTokenCount (the first
// chunk has inputTextTokenCount); or a body's inputTextTokenCount and
// results, each with outputText, tokenCount and completionReason. Counts
// may be written as floats (28.0), read as integers. A chunk with the
// total is the last: a stream a guardrail blocked ends with it and no
// completionReason.
func (b *bedrock) readTitan(o *Observer, c *invokeMembers) {
	in, out := int64(-1), int64(-1)
	if n, ok := rawCount(c.inputTextTokens); ok {
		in = n
	}
	var tokens eventOutput
	if t, ok := rawText(c.outputText); ok && t != "" {
		tokens.add(EstimateTokens(bytesOf(t)), true)
		o.emit(0, TextAnswer, c.outputText)
	}
	index := rawLooseInt(c.claude.index)
	done := invokeFinish(o, index, c.completionReason)
	if n, ok := rawCount(c.totalOutputTokens); ok {
		out = n
		if !done {
			o.Done()
		}
	}
	i := int64(0)
	rawValues(c.results, func(r string) bool {
		var text, reason, count string
		rawMembers(r, func(k, v string) bool {
			switch k {
			case "outputText":
				text = v
			case "completionReason":
				reason = v
			case "tokenCount":
				count = v
			}
			return true
		})
		if t, ok := rawText(text); ok && t != "" {
			tokens.add(EstimateTokens(bytesOf(t)), true)
			o.emit(0, TextAnswer, text)
		}
		if n, ok := rawCount(count); ok {
			out = max(out, 0) + n
		}
		invokeFinish(o, i, reason)
		i++
		return true
	})
	tokens.report(o)
	b.modelCounts(o, in, out)
}

// readLlama reads Meta Llama's chunks and bodies: generation is the text
// (a stream's first is often ""), prompt_token_count the input (null after
// the first chunk), generation_token_count the output so far, stop_reason
// why it stopped.
func (b *bedrock) readLlama(o *Observer, c *invokeMembers) {
	if t, ok := rawText(c.generation); ok && t != "" {
		o.Output(EstimateTokens(bytesOf(t)), true)
		o.emit(0, TextAnswer, c.generation)
	}
	in, out := int64(-1), int64(-1)
	if n, ok := rawCount(c.promptTokens); ok {
		in = n
	}
	if n, ok := rawCount(c.generationTokens); ok {
		out = n
	}
	b.modelCounts(o, in, out)
	invokeFinish(o, 0, c.stopReason)
}

// readMistralOutputs reads Mistral's text completion: outputs, each with
// text and stop_reason, in a chunk or a body. It carries no counts.
func readMistralOutputs(o *Observer, outputs string) {
	var out eventOutput
	i := int64(0)
	rawValues(outputs, func(v string) bool {
		text, reason := rawMember(v, "text"), rawMember(v, "stop_reason")
		if t, ok := rawText(text); ok && t != "" {
			out.add(EstimateTokens(bytesOf(t)), true)
			o.emit(0, TextAnswer, text)
		}
		invokeFinish(o, i, reason)
		i++
		return true
	})
	out.report(o)
}

// readChat reads the families that answer in OpenAI's Chat Completions
// shape, by openai_chat's own reader: their text, tool calls, usage and
// finish_reason are the same members. Mistral's and DeepSeek's choices
// say stop_reason instead of finish_reason, read here; either one ends
// the generation.
func (b *bedrock) readChat(o *Observer, s string, c *invokeMembers) {
	readOpenAIChunk(o, s)
	if rawKindOf(c.claude.usage) == kindObject {
		b.markSet(c.claude.usage, usageNames{input: "prompt_tokens", output: "completion_tokens"})
	}
	i := int64(0)
	rawValues(c.choices, func(v string) bool {
		var index, stop, fin string
		rawMembers(v, func(k, v string) bool {
			switch k {
			case "index":
				index = v
			case "stop_reason":
				stop = v
			case "finish_reason":
				fin = v
			}
			return true
		})
		n := i
		if index != "" {
			n = rawLooseInt(index)
		}
		if rawKindOf(fin) == kindString {
			// Recorded by readOpenAIChunk; it ends the generation.
			o.Done()
		} else {
			invokeFinish(o, n, stop)
		}
		i++
		return true
	})
}

// readCohere reads Cohere Command (generations, each with text and
// finish_reason; streamed as text and is_finished) and Command R (text and
// finish_reason; streamed as events named by event_type, text in
// text-generation, tool calls in tool-calls-chunk, the end in stream-end
// with is_finished). Neither carries counts.
func (b *bedrock) readCohere(o *Observer, c *invokeMembers) {
	var out eventOutput
	finished := c.isFinished == "true"
	switch typ, _ := rawText(c.eventType); typ {
	case "", "text-generation":
		// The last chunk of Command's stream repeats the whole response
		// under is_finished; its text is not new.
		if t, ok := rawText(c.text); ok && t != "" && !finished {
			out.add(EstimateTokens(bytesOf(t)), true)
			o.emit(0, TextAnswer, c.text)
		}
	case "tool-calls-chunk":
		// A call's name and its arguments are generated, not answer
		// text; so is the plan text before the calls.
		rawMembers(c.toolCallDelta, func(k, v string) bool {
			switch k {
			case "name", "parameters", "text":
				if t, ok := rawText(v); ok && t != "" {
					out.add(EstimateTokens(bytesOf(t)), false)
				}
			}
			return true
		})
	}
	i := int64(0)
	rawValues(c.generations, func(g string) bool {
		text := rawMember(g, "text")
		if t, ok := rawText(text); ok && t != "" {
			out.add(EstimateTokens(bytesOf(t)), true)
			o.emit(0, TextAnswer, text)
		}
		invokeFinish(o, i, rawMember(g, "finish_reason"))
		i++
		return true
	})
	out.report(o)
	invokeFinish(o, 0, c.finishReason)
	if finished {
		o.Done()
	}
	id := c.id
	if id == "" {
		id = c.responseID
	}
	o.identity("id", id)
}

// readJurassic reads AI21 Jurassic-2's body: completions, each with
// data.text, its data.tokens (one element per generated token, so their
// number is the output count) and finishReason.reason; prompt.tokens
// likewise counts the input.
func (b *bedrock) readJurassic(o *Observer, c *invokeMembers) {
	in, out := int64(-1), int64(-1)
	if t := rawMember(c.prompt, "tokens"); rawKindOf(t) == kindArray {
		in = rawLen(t)
	}
	var tokens eventOutput
	i := int64(0)
	rawValues(c.completions, func(v string) bool {
		data := rawMember(v, "data")
		text := rawMember(data, "text")
		if t, ok := rawText(text); ok && t != "" {
			tokens.add(EstimateTokens(bytesOf(t)), true)
			o.emit(0, TextAnswer, text)
		}
		if t := rawMember(data, "tokens"); rawKindOf(t) == kindArray {
			out = max(out, 0) + rawLen(t)
		}
		invokeFinish(o, i, rawMember(rawMember(v, "finishReason"), "reason"))
		i++
		return true
	})
	tokens.report(o)
	b.modelCounts(o, in, out)
}
