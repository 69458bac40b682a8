package meter

import (
	"bytes"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tokentap/tokentap/sse"
)

// geminiInfo registers Google's Gemini API and Vertex AI's Gemini endpoints,
// which share one body format: generateContent answers with one
// GenerateContentResponse, streamGenerateContent with a stream of them,
// framed as SSE with ?alt=sse and as one streamed JSON array without it.
// The provider is Gemini's; the caddymodule labels *aiplatform.googleapis.com
// upstreams gcp.vertex_ai by their host.
var geminiInfo = DialectInfo{
	Name:     "gemini",
	New:      func() Dialect { return newGemini() },
	Provider: "gcp.gemini",
	Matches: func(path string) bool {
		_, _, ok := geminiPath(path)
		return ok
	},
}

func init() {
	RegisterDialect(geminiInfo)
	// Google's error statuses and Gemini's rarer finish and block reasons
	// recur across exchanges; interning them keeps Observer.Error and
	// FinishReason from allocating for each one.
	for _, s := range []string{
		"UNAVAILABLE", "RESOURCE_EXHAUSTED", "INTERNAL", "INVALID_ARGUMENT",
		"DEADLINE_EXCEEDED", "PERMISSION_DENIED", "UNAUTHENTICATED", "NOT_FOUND",
		"FAILED_PRECONDITION", "CANCELLED",
		"FINISH_REASON_UNSPECIFIED", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
		"MALFORMED_FUNCTION_CALL", "LANGUAGE", "IMAGE_SAFETY", "UNEXPECTED_TOOL_CALL",
		"TOO_MANY_TOOL_CALLS",
	} {
		interned[s] = s
	}
}

// gemini keeps per-exchange state: whether the path streams (which decides
// how an application/json body is framed), the usage components that are
// summed into semconv's totals, which candidates have finished, and the
// framers it hands to the Meter.
type gemini struct {
	stream bool

	// The last reported value of each usageMetadata field that feeds a sum,
	// -1 until reported: a chunk that omits one of them must not make the
	// total fall back.
	prompt, toolUsePrompt, candidates, thoughts int64

	// Bit i is set when candidate i has appeared / has a finish reason.
	seen, finished uint64

	array geminiArrayFramer
	sse   geminiSSEFramer
}

func newGemini() *gemini {
	return &gemini{prompt: -1, toolUsePrompt: -1, candidates: -1, thoughts: -1}
}

func (*gemini) Name() string { return geminiInfo.Name }

// Operation is generate_content, semconv's name for Gemini's call, whether
// streamed or not.
func (*gemini) Operation(string) string { return "generate_content" }

// geminiPath reads a Gemini or Vertex AI method path: the model is the last
// segment before its ":method" (models/{m}, publishers/google/models/{m},
// tunedModels/{m}, or a Vertex endpoint id), and the method says whether the
// response streams. The path excludes the query, so ?alt=sse is not seen
// here; the response's media type says that.
func geminiPath(path string) (model string, stream, ok bool) {
	path = strings.TrimSuffix(path, "/")
	seg := path[strings.LastIndexByte(path, '/')+1:]
	colon := strings.LastIndexByte(seg, ':')
	if colon < 0 {
		return "", false, false
	}
	switch seg[colon+1:] {
	case "generateContent":
	case "streamGenerateContent":
		stream = true
	default:
		return "", false, false
	}
	return seg[:colon], stream, true
}

// Request takes the model and the streaming choice from the path, which is
// where Gemini puts them, and the sampling parameters from the body's
// generationConfig. The API also accepts proto field names, so snake_case
// is read too.
func (g *gemini) Request(r *Request, path string, body []byte) {
	if model, stream, ok := geminiPath(path); ok {
		r.Model = model
		r.Stream, r.HasStream = stream, true
		g.stream = stream
	}
	gc := gjson.GetBytes(body, "generationConfig")
	if !gc.Exists() {
		gc = gjson.GetBytes(body, "generation_config")
	}
	if !gc.IsObject() {
		return
	}
	if v := geminiField(gc, "maxOutputTokens", "max_output_tokens"); v.Type == gjson.Number {
		r.MaxTokens, r.HasMaxTokens = v.Int(), true
	}
	if v := gc.Get("temperature"); v.Type == gjson.Number {
		r.Temperature, r.HasTemperature = v.Float(), true
	}
	if v := geminiField(gc, "topP", "top_p"); v.Type == gjson.Number {
		r.TopP, r.HasTopP = v.Float(), true
	}
	readSampling(r, gc, geminiSampling)
}

func geminiField(obj gjson.Result, camel, snake string) gjson.Result {
	if v := obj.Get(camel); v.Exists() {
		return v
	}
	return obj.Get(snake)
}

// Framing reads error statuses whole, event streams with the SSE framer that
// also catches Gemini's unframed error objects, and the application/json
// body of a streaming method as the JSON array it is. A non-streaming
// method's JSON is one body.
func (g *gemini) Framing(status int, mediaType string, maxEvent int, emit func(*sse.Event)) (Framing, Framer) {
	switch {
	case status >= 400:
		return FramingBody, nil
	case mediaType == "text/event-stream":
		g.sse.init(maxEvent, emit)
		return FramingCustom, &g.sse
	case g.stream && (mediaType == "application/json" || mediaType == ""):
		g.array.init(maxEvent, emit)
		return FramingCustom, &g.array
	}
	return DefaultFraming(status, mediaType), nil
}

// Event reads one streamed GenerateContentResponse (an SSE event's data, an
// array element, or an unframed error object).
func (g *gemini) Event(o *Observer, ev *sse.Event) {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 || data[0] != '{' {
		// A gateway's [DONE] never gets here (Meter.onEvent).
		o.Degrade("event_not_json")
		return
	}
	g.readChunk(o, view(data))
}

// Body reads a generateContent response, an error body, or a whole
// streamGenerateContent array when the stream was not framed as one.
func (g *gemini) Body(o *Observer, body []byte) {
	body = bytes.TrimSpace(body)
	switch {
	case len(body) == 0:
		o.Degrade("body_not_json")
	case body[0] == '{':
		g.readChunk(o, view(body))
	case body[0] == '[':
		gjson.Parse(view(body)).ForEach(func(_, v gjson.Result) bool {
			if v.IsObject() {
				g.readChunk(o, v.Raw)
			}
			return true
		})
	default:
		o.Degrade("body_not_json")
	}
}

// modelsPrefix is what the Gemini API has put before a model name.
var modelsPrefix = []byte("models/")

// readChunk reads one GenerateContentResponse in one pass over its keys,
// descending into candidates, their content and its parts as it meets
// them (rawWalkMembers), so that no byte of them is scanned twice.
func (g *gemini) readChunk(o *Observer, s string) {
	var out eventOutput
	var finished bool
	var members int
	rawWalkMembers(s, func(k, rest string) int {
		if k == "candidates" {
			var pos int64
			end := rawWalkElements(rest, func(c string) int {
				cand, end, fin := g.readCandidate(o, c, pos)
				out.merge(cand)
				finished = finished || fin
				pos++
				return end
			})
			// members counts what rawMembers would hand out: values
			// that end.
			if end > 0 || rawValueAt(rest) != "" {
				members++
			}
			return end
		}
		raw := rawValueAt(rest)
		if raw == "" {
			return 0
		}
		members++
		var b rawBuf
		switch k {
		case "usageMetadata":
			if rawKindOf(raw) == kindObject {
				g.readUsage(o, raw)
			}
		case "modelVersion":
			// The Gemini API has reported "models/gemini-…" and
			// "gemini-…" for the same model; the request model never
			// has the prefix.
			if m, ok := rawStr(raw, b[:0]); ok {
				o.Model(bytes.TrimPrefix(m, modelsPrefix))
			}
		case "responseId":
			if id, ok := rawStr(raw, b[:0]); ok {
				o.ResponseID(id)
			}
		case "promptFeedback":
			// A blocked prompt is a complete answer with no candidates:
			// the block reason is the only finish reason there is.
			if r, ok := rawStr(rawMember(raw, "blockReason"), b[:0]); ok && len(r) > 0 {
				o.FinishReason(0, r)
				o.Done()
			}
		case "error":
			if rawKindOf(raw) != kindNull {
				o.Error(geminiErrorType(gjson.Parse(raw)))
			}
		}
		return len(raw)
	})
	if members == 0 {
		// The raw reader hands out nothing of a malformed object, and the
		// one malformed object that matters is a bare error cut off by the
		// end of the stream: read it leniently.
		if e := gjson.Get(s, "error"); e.Exists() && e.Type != gjson.Null {
			o.Error(geminiErrorType(e))
		}
	}
	out.report(o)
	// Gemini has no end marker: the stream ends after the chunk that
	// finishes the last unfinished candidate.
	if finished && g.finished&g.seen == g.seen {
		o.Done()
	}
}

// readCandidate reads the candidate at the start of c and returns its
// length (as a walker's callback does) with what it held; pos is its place
// in the array, its index when the index is omitted (proto3 JSON drops a
// zero index).
func (g *gemini) readCandidate(o *Observer, c string, pos int64) (out eventOutput, end int, finished bool) {
	index := pos
	var finish string
	if o.capturing() {
		// The index may come after the content; captured text needs it
		// first.
		if n, ok := rawInt(rawMember(c, "index")); ok {
			index = n
		}
		o.setChoice(index)
	}
	end = rawWalkMembers(c, func(k, rest string) int {
		if k == "content" {
			// The content's first parts, as a lookup finds them.
			var parts bool
			return rawWalkMembers(rest, func(k, rest string) int {
				if k != "parts" || parts {
					return 0
				}
				parts = true
				return rawWalkElements(rest, func(part string) int {
					p, end := readGeminiPart(o, part)
					out.merge(p)
					return end
				})
			})
		}
		v := rawValueAt(rest)
		switch k {
		case "index":
			if n, ok := rawInt(v); ok {
				index = n
			}
		case "finishReason":
			finish = geminiStringBody(v)
		}
		return len(v)
	})
	var bit uint64
	if index >= 0 && index < 64 {
		bit = 1 << uint(index)
	}
	g.seen |= bit
	if finish != "" {
		o.FinishReason(index, bytesOf(finish))
		g.finished |= bit
		finished = bit != 0
	}
	return out, end, finished
}

// readGeminiPart reads one content part. Text is answer text unless the
// part is a thought summary; a function call (whole, or Vertex's streamed
// partialArgs) and generated code are output but not answer text; an inline
// image from an image model is the answer itself, with no text to estimate.
// Parts that hold only a thoughtSignature, or empty text, are not output.
// It returns the part's length, as a walker's callback does.
func readGeminiPart(o *Observer, part string) (out eventOutput, end int) {
	var text, textRaw string
	var thought, inline bool
	end = rawWalkMembers(part, func(k, rest string) int {
		v := rawValueAt(rest)
		if v == "" {
			return 0
		}
		switch k {
		case "text":
			text, textRaw = geminiStringBody(v), v
		case "thought":
			thought = v == "true"
		case "functionCall":
			out.merge(geminiCallTokens(v))
			if o.capturing() {
				emitGeminiCall(o, o.newItem(), v)
			}
		case "executableCode":
			if code := geminiStringBody(rawMember(v, "code")); code != "" {
				out.add(EstimateTokens(bytesOf(code)), false)
				if o.capturing() {
					// Code the model writes for its code execution
					// tool is a call of that tool.
					item := o.newItem()
					o.emit(item, TextToolCallName, `"code_execution"`)
					o.emit(item, TextToolCallArguments, v)
				}
			}
		case "inlineData":
			inline = v[0] == '{'
		}
		return len(v)
	})
	if text != "" {
		out.add(EstimateTokens(bytesOf(text)), !thought)
		if thought {
			o.Reasoning()
			o.emit(0, TextReasoning, textRaw)
		} else {
			o.emit(0, TextAnswer, textRaw)
		}
	}
	if inline && !thought {
		out.add(0, true)
	}
	return out, end
}

// geminiCallTokens estimates a functionCall's generated tokens: its name and
// arguments, or the values of its partialArgs (their jsonPath is structure,
// not generated text).
func geminiCallTokens(fc string) (out eventOutput) {
	rawMembers(fc, func(k, v string) bool {
		switch k {
		case "name":
			if name := geminiStringBody(v); name != "" {
				out.add(EstimateTokens(bytesOf(name)), false)
			}
		case "args":
			if v[0] == '{' && v != "{}" {
				out.add(EstimateTokens(bytesOf(v)), false)
			}
		case "partialArgs":
			gjson.Parse(v).ForEach(func(_, arg gjson.Result) bool {
				rawMembers(arg.Raw, func(ak, av string) bool {
					if ak == "jsonPath" || ak == "willContinue" {
						return true
					}
					// A partial string that only closes the value
					// ("stringValue":"") carries no text and is no token.
					if str := geminiStringBody(av); str != "" {
						out.add(EstimateTokens(bytesOf(str)), false)
					} else if av[0] != '"' {
						out.add(EstimateTokens(bytesOf(av)), false)
					}
					return true
				})
				return true
			})
		}
		return true
	})
	return out
}

// emitGeminiCall hands a text sink a functionCall part, which arrives
// whole: its id (Vertex AI and newer models send one), name and args.
// Vertex's streamed partialArgs are not put back together.
func emitGeminiCall(o *Observer, item int, fc string) {
	var id, name, args string
	rawMembers(fc, func(k, v string) bool {
		switch k {
		case "id":
			id = v
		case "name":
			name = v
		case "args":
			args = v
		}
		return true
	})
	if rawNonEmptyString(name) {
		o.emit(item, TextToolCallName, name)
	}
	if rawNonEmptyString(id) {
		o.emit(item, TextToolCallID, id)
	}
	if rawKindOf(args) == kindObject {
		o.emit(item, TextToolCallArguments, args)
	}
}

// geminiStringBody returns the inside of a raw JSON string, escapes
// included, or "" for anything else.
func geminiStringBody(raw string) string {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		return raw[1 : len(raw)-1]
	}
	return ""
}

// readUsage reads a cumulative usageMetadata. In semconv terms input is the
// prompt (which already includes cachedContentTokenCount) plus the tool-use
// prompt (grounding results the model read, billed as input), and output
// is candidates plus thoughts, since Gemini's candidatesTokenCount excludes
// the thinking it bills as output. Early chunks omit candidatesTokenCount
// and Vertex chunks may carry only trafficType, so each component keeps its
// last reported value and a usage with no count at all is not reported.
func (g *gemini) readUsage(o *Observer, u string) {
	out := unknownUsage
	known := false
	rawMembers(u, func(k, raw string) bool {
		v, ok := rawInt(raw)
		if !ok {
			return true
		}
		switch k {
		case "promptTokenCount":
			g.prompt = v
		case "toolUsePromptTokenCount":
			g.toolUsePrompt = v
		case "candidatesTokenCount":
			g.candidates = v
		case "thoughtsTokenCount":
			g.thoughts = v
			out.ReasoningOutputTokens = g.thoughts
		case "cachedContentTokenCount":
			out.CacheReadInputTokens = v
		default:
			return true
		}
		known = true
		return true
	})
	if !known {
		return
	}
	if g.prompt >= 0 {
		out.InputTokens = g.prompt + max(g.toolUsePrompt, 0)
	}
	if g.candidates >= 0 || g.thoughts >= 0 {
		out.OutputTokens = max(g.candidates, 0) + max(g.thoughts, 0)
	}
	o.Usage(out)
}

// geminiErrorType names a Google API error by its status ("UNAVAILABLE",
// "RESOURCE_EXHAUSTED"), else its numeric code.
func geminiErrorType(e gjson.Result) []byte {
	if s := e.Get("status"); s.Type == gjson.String && s.Str != "" {
		return bytesOf(s.Str)
	}
	if c := e.Get("code"); c.Type == gjson.Number {
		return bytesOf(c.Raw)
	} else if c.Type == gjson.String && c.Str != "" {
		return bytesOf(c.Str)
	}
	return nil
}
