package meter

// The generated text, for content capture.
//
// The meter reads generated text only to count it, and keeps none of it.
// A user who opts in to content capture needs the text itself: a TextSink
// set with Meter.SetTextSink receives every fragment the dialects read, at
// the same places they count it. With no sink (the default) each of those
// places costs one nil check, so the hot path stays as fast and
// allocation-free as without this hook.

// TextKind says what a fragment of generated text is.
type TextKind uint8

const (
	// TextAnswer is answer text: content, refusals, generated code.
	TextAnswer TextKind = iota
	// TextReasoning is reasoning the model shows: thinking, reasoning
	// summaries, Cohere's tool plan.
	TextReasoning
	// TextToolCallID is a tool call's id (OpenAI's call_..., Anthropic's
	// toolu_...), sent once when the call starts.
	TextToolCallID
	// TextToolCallName is the name of the tool called, sent once when the
	// call starts.
	TextToolCallName
	// TextToolCallArguments is a piece of a tool call's arguments: a JSON
	// string holding a fragment of the arguments' JSON text (OpenAI,
	// Anthropic, Cohere, Bedrock), or the arguments whole as a JSON object
	// (Gemini, Ollama).
	TextToolCallArguments
)

// TextSink receives the generated text of one exchange, streamed or read
// from a whole body. It is called on the goroutine that measures (the
// request's, or the one decompressing a compressed body until Finish
// returns), one call at a time.
type TextSink interface {
	// Text is one fragment. choice is the choice or candidate it belongs
	// to (0 for APIs with one); item tells apart the tool calls of one
	// choice (the call's index or content block, 0 for text), so that
	// fragments of calls streamed side by side can be put back together.
	// raw is a JSON value as written in the event, escapes and quotes
	// included: usually a string, whose text AppendText decodes; raw
	// aliases the event and is valid only during the call.
	Text(choice, item int, kind TextKind, raw string)
}

// SetTextSink makes the meter hand the generated text to s; nil (the
// default) stops it. Call it after Init, which clears it.
func (mt *Meter) SetTextSink(s TextSink) { mt.obs.text = s }

// AppendText appends to dst the text of raw, a JSON value as a TextSink
// receives it: a string's contents with its escapes decoded, or any other
// value as written.
func AppendText(dst []byte, raw string) []byte {
	if in, ok := rawText(raw); ok {
		return rawUnescape(dst, in)
	}
	return append(dst, raw...)
}

// Text hands a fragment of choice's generated text to the exchange's
// TextSink, as the built-in dialects do wherever they count output: a
// dialect registered from another package has no other way to get its
// output captured. raw is as TextSink.Text takes it; without a sink (the
// default) the call costs a nil check.
func (o *Observer) Text(choice, item int, kind TextKind, raw string) {
	if o.text != nil && choice >= 0 && choice < maxChoices && rawKindOf(raw) != kindInvalid {
		o.text.Text(choice, item, kind, raw)
	}
}

// capturing reports whether a text sink is set, for dialects that must
// read something extra (an index, a tool call's name) only to give it one.
func (o *Observer) capturing() bool { return o.text != nil }

// emit hands a fragment of the current choice to the sink, if any (and
// if the choice is within bounds); the call is one nil check without one.
// A fragment that is not a JSON value (a member a malformed body lacks,
// read leniently) is not one to record, and the sink never sees it.
func (o *Observer) emit(item int, kind TextKind, raw string) {
	if o.text != nil && o.choice >= 0 && rawKindOf(raw) != kindInvalid {
		o.text.Text(o.choice, item, kind, raw)
	}
}

// newItem numbers a tool call that arrives whole (Gemini's functionCall,
// Ollama's tool_calls), so that each is its own item even when the
// positions they come at repeat from one event to the next.
func (o *Observer) newItem() int {
	o.items++
	return o.items
}

// setChoice sets the choice the next fragments belong to.
func (o *Observer) setChoice(index int64) {
	if index < 0 || index >= maxChoices {
		index = -1
	}
	o.choice = int(index)
}
