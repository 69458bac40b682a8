package capture

import (
	"unicode/utf8"

	"github.com/tokentap/tokentap/internal/meter"
)

// maxChoices bounds the choices kept, as the meter bounds the finish
// reasons it keeps: n>1 is rare and small.
const maxChoices = 64

// partCost is what a new part counts against the size bound besides its
// text, so that a stream of many tiny parts (alternating text and
// reasoning, a call per event) cannot grow memory past the bound either.
const partCost = 32

// Output puts the generated text of one exchange back together as output
// messages, one per choice or candidate, as a meter.TextSink receiving it
// from the dialects. It keeps at most its maximum size of text and part
// overhead; past that it drops the rest and says so.
//
// An Output is used by one exchange at a time, from the goroutine that
// measures it; the zero value is not usable, call NewOutput.
type Output struct {
	max       int
	used      int
	truncated bool
	choices   [][]Part
	scratch   []byte
}

// NewOutput returns an Output that keeps at most max bytes (DefaultMaxSize
// if max <= 0).
func NewOutput(max int) *Output {
	if max <= 0 {
		max = DefaultMaxSize
	}
	return &Output{max: max}
}

// Text implements meter.TextSink.
func (o *Output) Text(choice, item int, kind meter.TextKind, raw string) {
	if choice < 0 || choice >= maxChoices {
		return
	}
	if o.used >= o.max {
		o.truncated = true
		return
	}
	o.scratch = meter.AppendText(o.scratch[:0], raw)
	text := o.scratch
	if len(text) == 0 {
		return
	}
	for len(o.choices) <= choice {
		o.choices = append(o.choices, nil)
	}
	parts := o.choices[choice]
	switch kind {
	case meter.TextAnswer, meter.TextReasoning:
		typ := typeText
		if kind == meter.TextReasoning {
			typ = typeReasoning
		}
		// Consecutive fragments of one kind are one part; another kind
		// in between starts a new one, so the order is kept.
		if n := len(parts); n > 0 && parts[n-1].Type == typ {
			parts[n-1].Content = o.appendText(parts[n-1].Content, text)
		} else if o.newPart() {
			parts = append(parts, Part{Type: typ, Content: o.appendText(nil, text)})
		}
	case meter.TextToolCallID, meter.TextToolCallName:
		p := lastCall(parts, item)
		field := func(p *Part) *string {
			if kind == meter.TextToolCallID {
				return &p.ID
			}
			return &p.Name
		}
		value := small(string(text), &o.truncated)
		switch {
		case p != nil && *field(p) == value:
			// Some servers repeat a call's id and name in every delta.
		case p != nil && *field(p) == "":
			*field(p) = value
		case o.newPart():
			// A call with another id or name at the same place is the
			// next call.
			parts = append(parts, Part{Type: typeToolCall, item: item})
			*field(&parts[len(parts)-1]) = value
		}
	case meter.TextToolCallArguments:
		if p := lastCall(parts, item); p != nil {
			p.Args = o.appendText(p.Args, text)
		} else if o.newPart() {
			parts = append(parts, Part{Type: typeToolCall, item: item, Args: o.appendText(nil, text)})
		}
	}
	o.choices[choice] = parts
}

// lastCall is the latest tool call part of item, or nil.
func lastCall(parts []Part, item int) *Part {
	for i := len(parts) - 1; i >= 0; i-- {
		if parts[i].Type == typeToolCall && parts[i].item == item {
			return &parts[i]
		}
	}
	return nil
}

// newPart counts a new part against the bound and reports whether it fits.
func (o *Output) newPart() bool {
	if o.used+partCost > o.max {
		o.used, o.truncated = o.max, true
		return false
	}
	o.used += partCost
	return true
}

// appendText appends what fits of text to dst, cut between characters.
func (o *Output) appendText(dst, text []byte) []byte {
	room := o.max - o.used
	if len(text) > room {
		o.truncated = true
		cut := room
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut]
		o.used = o.max
	} else {
		o.used += len(text)
	}
	return append(dst, text...)
}

// Result is gen_ai.output.messages: one assistant message per choice that
// generated anything or finished, with its finish reason from
// finishReasons (the meter's, by choice index). A choice without one gets
// "error" when the exchange did not complete (as the conventions ask for
// a stream that ended first) and "stop" when it did. The JSON is at most
// max bytes; the result is empty when there is nothing to record.
func (o *Output) Result(finishReasons []string, completed bool, max int) Result {
	if max <= 0 {
		max = DefaultMaxSize
	}
	n := len(o.choices)
	for i, r := range finishReasons {
		if r != "" && i >= n && i < maxChoices {
			n = i + 1
		}
	}
	if n == 0 {
		return Result{}
	}
	msgs := make([]Message, n)
	for i := range msgs {
		m := &msgs[i]
		m.Role, m.hasFinish = "assistant", true
		if i < len(o.choices) {
			m.Parts = o.choices[i]
		}
		if m.Parts == nil {
			m.Parts = []Part{}
		}
		switch {
		case i < len(finishReasons) && finishReasons[i] != "":
			m.FinishReason = small(finishReasons[i], new(bool))
		case completed:
			m.FinishReason = "stop"
		default:
			m.FinishReason = "error"
		}
	}
	r := encodeMessages(msgs, max)
	r.Truncated = r.Truncated || o.truncated
	return r
}
