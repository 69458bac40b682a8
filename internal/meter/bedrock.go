package meter

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tokentap/tokentap/sse"
)

// bedrockConverseInfo registers AWS Bedrock's Converse API, the same shape
// for every model: /model/{modelId}/converse and, streamed as a binary event
// stream, /model/{modelId}/converse-stream.
var bedrockConverseInfo = DialectInfo{
	Name:     "bedrock_converse",
	New:      func() Dialect { return newBedrock(false) },
	Provider: "aws.bedrock",
	Matches: func(path string) bool {
		_, op, ok := bedrockPath(path)
		return ok && (op == "converse" || op == "converse-stream")
	},
}

// bedrockInvokeInfo registers InvokeModel (/model/{modelId}/invoke) and
// InvokeModelWithResponseStream (/model/{modelId}/invoke-with-response-stream),
// whose bodies are the model's native JSON, each family's own
// (bedrock_invoke.go): Anthropic's Messages events for Claude, Nova's
// Converse-shaped events, Titan's, Llama's, Mistral's, Cohere's, AI21's,
// and OpenAI's Chat Completions shape for DeepSeek, gpt-oss, Jamba and
// others.
var bedrockInvokeInfo = DialectInfo{
	Name:     "bedrock_invoke",
	New:      func() Dialect { return newBedrock(true) },
	Provider: "aws.bedrock",
	Matches: func(path string) bool {
		_, op, ok := bedrockPath(path)
		return ok && (op == "invoke" || op == "invoke-with-response-stream")
	},
}

func init() {
	RegisterDialect(bedrockConverseInfo)
	RegisterDialect(bedrockInvokeInfo)
	// Exception types and stop reasons recur on every exchange that has
	// them; interned, recording them does not allocate.
	for _, s := range []string{
		"throttlingException", "modelStreamErrorException", "internalServerException",
		"validationException", "serviceUnavailableException", "modelTimeoutException",
		"guardrail_intervened", "content_filtered", "model_context_window_exceeded",
		// InvokeModel's families' finish reasons: Titan's, Cohere's,
		// AI21's, DeepSeek's.
		"FINISH", "LENGTH", "CONTENT_FILTERED", "COMPLETE", "ERROR", "ERROR_TOXIC",
		"ERROR_LIMIT", "USER_CANCEL", "STOP_SEQUENCE", "endoftext", "eos_token",
	} {
		interned[s] = s
	}
}

// bedrockMediaType is the binary event stream's content type.
const bedrockMediaType = "application/vnd.amazon.eventstream"

// Event types the framer gives messages that are not events. Real event
// types are identifiers ("contentBlockDelta", "chunk"), so a colon cannot
// collide with one.
const (
	bedrockExceptionPrefix = "exception:" // + :exception-type, a modelled error
	bedrockErrorPrefix     = "error:"     // + :error-code, an unmodelled error
)

// bedrock reads both Bedrock APIs; invoke says which. It keeps the parts of
// the input count, because the sum semconv wants is not what any one event
// says, which of the counts came from the model's own JSON rather than
// from Bedrock's metrics or headers, and buffers for the base64-decoded
// model-native chunks and for the base64 itself when its JSON string has
// escapes ("\/").
type bedrock struct {
	invoke bool
	usage  usageParts
	// set says which counts the model's own JSON gave (bedrock_invoke.go).
	set       modelSet
	native    []byte
	unescaped []byte
	framer    bedrockFramer
}

func newBedrock(invoke bool) *bedrock {
	return &bedrock{invoke: invoke, usage: newUsageParts()}
}

// Name implements Dialect.
func (b *bedrock) Name() string {
	if b.invoke {
		return bedrockInvokeInfo.Name
	}
	return bedrockConverseInfo.Name
}

// Operation implements Dialect. Converse only chats; InvokeModel also serves
// embedding models, whose ids say so (amazon.titan-embed-text-v2:0,
// cohere.embed-english-v3).
func (b *bedrock) Operation(path string) string {
	if b.invoke {
		if model, _, _ := bedrockPath(path); strings.Contains(strings.ToLower(model), "embed") {
			return "embeddings"
		}
	}
	return "chat"
}

// bedrockPath splits a Bedrock runtime path into the model id and the
// operation segment. The model id is everything between /model/ and the
// last segment, because an ARN model id (an inference profile, a
// provisioned model) has slashes of its own once the path is unescaped.
func bedrockPath(path string) (model, op string, ok bool) {
	i := strings.Index(path, "/model/")
	if i < 0 {
		return "", "", false
	}
	rest := strings.TrimSuffix(path[i+len("/model/"):], "/")
	j := strings.LastIndexByte(rest, '/')
	if j <= 0 {
		return "", "", false
	}
	model, op = rest[:j], rest[j+1:]
	switch op {
	case "converse", "converse-stream", "invoke", "invoke-with-response-stream":
		return model, op, true
	}
	return "", "", false
}

// Request implements Dialect: the model and the streaming choice are in the
// path, the parameters in the body (Converse's inferenceConfig, or the
// model's native names on InvokeModel).
func (b *bedrock) Request(r *Request, path string, body []byte) {
	model, op, ok := bedrockPath(path)
	if !ok {
		return
	}
	if strings.Contains(model, "%") {
		// Clients escape the ARN's colons and slashes; the path may reach
		// us escaped or not, depending on the server in front.
		if m, err := url.PathUnescape(model); err == nil {
			model = m
		}
	}
	r.Model = model
	r.Stream, r.HasStream = strings.HasSuffix(op, "-stream"), true
	max, temp, topP := "inferenceConfig.maxTokens", "inferenceConfig.temperature", "inferenceConfig.topP"
	if b.invoke {
		max = "max_tokens|max_completion_tokens|max_gen_len|maxTokens|textGenerationConfig.maxTokenCount|inferenceConfig.max_new_tokens"
		temp = "temperature|textGenerationConfig.temperature|inferenceConfig.temperature"
		topP = "top_p|topP|textGenerationConfig.topP|inferenceConfig.top_p|inferenceConfig.topP"
	}
	if v := bedrockFirst(body, max); v.Type == gjson.Number {
		r.MaxTokens, r.HasMaxTokens = v.Int(), true
	}
	if v := bedrockFirst(body, temp); v.Type == gjson.Number {
		r.Temperature, r.HasTemperature = v.Float(), true
	}
	if v := bedrockFirst(body, topP); v.Type == gjson.Number {
		r.TopP, r.HasTopP = v.Float(), true
	}
	sampling := bedrockConverseSampling
	if b.invoke {
		sampling = bedrockInvokeSampling
	}
	readSampling(r, gjson.ParseBytes(body), sampling)
}

// bedrockFirst returns the first of |-separated paths present in body.
func bedrockFirst(body []byte, paths string) gjson.Result {
	for p := range strings.SplitSeq(paths, "|") {
		if v := gjson.GetBytes(body, p); v.Exists() {
			return v
		}
	}
	return gjson.Result{}
}

// Framing implements FramingChooser: the event stream is framed by its own
// binary framing; anything else (a non-streamed body, an error) is read
// whole as its media type says.
func (b *bedrock) Framing(status int, mediaType string, maxEvent int, emit func(*sse.Event)) (Framing, Framer) {
	if mediaType == bedrockMediaType {
		b.framer.init(maxEvent, emit)
		return FramingCustom, &b.framer
	}
	return DefaultFraming(status, mediaType), nil
}

// Event implements Dialect: one message of the event stream.
func (b *bedrock) Event(o *Observer, ev *sse.Event) {
	typ := ev.Type
	switch {
	case bytes.HasPrefix(typ, []byte(bedrockExceptionPrefix)):
		o.Error(typ[len(bedrockExceptionPrefix):])
		return
	case bytes.HasPrefix(typ, []byte(bedrockErrorPrefix)):
		o.Error(typ[len(bedrockErrorPrefix):])
		return
	}
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 || data[0] != '{' {
		o.Degrade("event_not_json")
		return
	}
	if b.invoke {
		if string(typ) == "chunk" {
			b.readChunk(o, view(data))
		}
		return
	}
	b.readConverseEvent(o, typ, view(data))
}

// readConverseEvent reads one ConverseStream event. messageStart (the role)
// and contentBlockStop carry no generated output; nor does the random-length
// "p" padding every event has. A contentBlockStart that names a tool call
// does: the name is generated, billed output and the call's first token, as
// in the other dialects (docs/telemetry.md).
// Events are read with the raw reader of jsonraw.go, because generated text
// is full of escapes, which a decoding reader allocates for.
func (b *bedrock) readConverseEvent(o *Observer, typ []byte, s string) {
	switch string(typ) {
	case "contentBlockDelta":
		item := 0
		if o.capturing() {
			item = int(rawLooseInt(rawMember(s, "contentBlockIndex")))
		}
		bedrockConverseDelta(o, rawMember(s, "delta"), item)
	case "contentBlockStart":
		if name, ok := rawText(rawMember(rawMember(rawMember(s, "start"), "toolUse"), "name")); ok && name != "" {
			o.Output(estimateText(bytesOf(name)), false)
		}
		if o.capturing() {
			// A tool call's id and name come here, before its input.
			item := int(rawLooseInt(rawMember(s, "contentBlockIndex")))
			tool := rawMember(rawMember(s, "start"), "toolUse")
			if id := rawMember(tool, "toolUseId"); rawNonEmptyString(id) {
				o.emit(item, TextToolCallID, id)
			}
			if name := rawMember(tool, "name"); rawNonEmptyString(name) {
				o.emit(item, TextToolCallName, name)
			}
		}
	case "messageStop":
		var buf rawBuf
		if r, ok := rawStr(rawMember(s, "stopReason"), buf[:0]); ok {
			o.FinishReason(0, r)
		}
		// The generation is over; the metadata event that follows only
		// reports on it, so a stream that loses it is still complete.
		o.Done()
	case "metadata":
		b.readConverseMetadata(o, s)
		o.Done()
	}
}

// bedrockConverseDelta reads a contentBlockDelta's delta: text is visible;
// reasoning text and tool input are output but not visible. A reasoning
// signature or redacted reasoning is not generated text. item is the
// content block's index, for a text sink.
func bedrockConverseDelta(o *Observer, d string, item int) {
	var out eventOutput
	rawMembers(d, func(k, v string) bool {
		var text string
		kind := TextAnswer
		switch k {
		case "text":
			text = v
		case "reasoningContent":
			text, kind = rawMember(v, "text"), TextReasoning
		case "toolUse":
			// The first delta of a tool call may be "": not a token.
			text, kind = rawMember(v, "input"), TextToolCallArguments
		}
		if t, ok := rawText(text); ok && t != "" {
			out.add(EstimateTokens(bytesOf(t)), k == "text")
			if kind == TextReasoning {
				o.Reasoning()
			}
			o.emit(item, kind, text)
		}
		return true
	})
	out.report(o)
}

// readConverseMetadata reads the usage and metrics of the metadata event
// (or a whole Converse response). AWS documents inputTokens as excluding
// the cache reads and writes, so the semconv input is their sum.
func (b *bedrock) readConverseMetadata(o *Observer, m string) {
	rawMembers(m, func(k, v string) bool {
		switch k {
		case "usage":
			b.readUsage(o, v, usageNames{input: "inputTokens", output: "outputTokens", cacheRead: "cacheReadInputTokens", cacheWrite: "cacheWriteInputTokens"})
		case "metrics":
			if l, ok := rawFloat(rawMember(v, "latencyMs")); ok {
				o.ServerTiming("latency", l/1000)
			}
		}
		return true
	})
}

// readUsage merges a usage object whose field names are given: the input
// parts are kept, so the reported input is always the sum of the latest
// value of each.
func (b *bedrock) readUsage(o *Observer, u string, names usageNames) {
	if rawKindOf(u) != kindObject {
		return
	}
	b.usage.read(o, u, names)
}

// readChunk reads an InvokeModelWithResponseStream chunk: its "bytes" is the
// base64 of one model-native JSON event, decoded into a buffer kept for the
// exchange.
func (b *bedrock) readChunk(o *Observer, s string) {
	enc, ok := rawText(rawMember(s, "bytes"))
	if !ok {
		o.Degrade("chunk_without_bytes")
		return
	}
	// The base64 is read in place unless the JSON escaped a "/" as "\/"
	// (or anything else), which is then decoded into a buffer kept for
	// the exchange.
	src := bytesOf(enc)
	if strings.IndexByte(enc, '\\') >= 0 {
		b.unescaped = rawUnescape(b.unescaped[:0], enc)
		src = b.unescaped
	}
	// Room for either decoding: unpadded input needs more than padded.
	size := max(base64.StdEncoding.DecodedLen(len(src)), base64.RawStdEncoding.DecodedLen(len(src)))
	if cap(b.native) < size {
		b.native = make([]byte, size)
	}
	n, err := base64.StdEncoding.Decode(b.native[:size], src)
	if err != nil {
		// Unpadded base64 is not what Bedrock sends, but costs nothing to
		// accept.
		n, err = base64.RawStdEncoding.Decode(b.native[:size], src)
	}
	if err != nil {
		o.Degrade("chunk_not_base64")
		return
	}
	native := bytes.TrimSpace(b.native[:n])
	if string(native) == `"[DONE]"` {
		// Writer's Palmyra ends its chunks as OpenAI's streams end.
		o.Done()
		return
	}
	if len(native) == 0 || native[0] != '{' {
		o.Degrade("chunk_not_json")
		return
	}
	b.readNative(o, view(native))
}

// Body implements Dialect: a whole Converse or InvokeModel response, or an
// error body ({"message": ...}, the type being in a header we do not see).
func (b *bedrock) Body(o *Observer, body []byte) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		o.Degrade("body_not_json")
		return
	}
	s := view(body)
	if b.invoke {
		b.readInvokeBody(o, s)
		return
	}
	root := gjson.Parse(s)
	switch {
	case root.Get("output").Exists():
		b.readConverseBody(o, root)
	case root.Get("message").Exists() || root.Get("Message").Exists():
		bedrockErrorBody(o, root)
	}
}

// bedrockErrorBody records an error body. AWS puts the error's type in the
// x-amzn-ErrorType header, which the meter does not see; some gateways copy
// it into "__type" as "namespace#ThrottlingException".
func bedrockErrorBody(o *Observer, root gjson.Result) {
	t := root.Get("__type").Str
	if i := strings.LastIndexByte(t, '#'); i >= 0 {
		t = t[i+1:]
	}
	o.Error(bytesOf(t))
}

// readConverseBody reads a whole Converse response.
func (b *bedrock) readConverseBody(o *Observer, root gjson.Result) {
	var tokens int64
	item := 0
	root.Get("output.message.content").ForEach(func(_, block gjson.Result) bool {
		block.ForEach(func(k, v gjson.Result) bool {
			var text gjson.Result
			kind := TextAnswer
			switch k.Str {
			case "text":
				text = v
			case "reasoningContent":
				text, kind = v.Get("reasoningText.text"), TextReasoning
			case "toolUse":
				if in := v.Get("input"); in.IsObject() {
					tokens += EstimateTokens(bytesOf(in.Raw))
					if o.capturing() {
						o.emit(item, TextToolCallID, v.Get("toolUseId").Raw)
						o.emit(item, TextToolCallName, v.Get("name").Raw)
						o.emit(item, TextToolCallArguments, in.Raw)
					}
				}
			}
			if text.Type == gjson.String {
				tokens += EstimateTokens(gjsonText(text))
				o.emit(item, kind, text.Raw)
			}
			return true
		})
		item++
		return true
	})
	if r := root.Get("stopReason"); r.Type == gjson.String {
		o.FinishReason(0, bytesOf(r.Str))
	}
	b.readConverseMetadata(o, root.Raw)
	if tokens > 0 {
		o.Output(tokens, true)
	}
}

// gjsonText is the inside of a gjson string result, escapes kept, as
// EstimateTokens reads it: for the whole bodies, read with gjson.
func gjsonText(v gjson.Result) []byte {
	r := v.Raw
	if len(r) >= 2 {
		r = r[1 : len(r)-1]
	}
	return bytesOf(r)
}
