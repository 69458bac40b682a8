package loadgen

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// requestBody renders the streaming request of one API. encoding/json
// escapes the prompt, which may come from a file and hold anything.
func requestBody(api API, model, prompt string, maxTokens int) []byte {
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	messages := []message{{Role: "user", Content: prompt}}
	var v any
	switch api {
	case Anthropic:
		if maxTokens == 0 {
			maxTokens = DefaultAnthropicMaxTokens
		}
		v = struct {
			Model     string    `json:"model"`
			MaxTokens int       `json:"max_tokens"`
			Stream    bool      `json:"stream"`
			Messages  []message `json:"messages"`
		}{model, maxTokens, true, messages}
	default:
		type streamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		}
		v = struct {
			Model     string        `json:"model"`
			Stream    bool          `json:"stream"`
			Options   streamOptions `json:"stream_options"`
			MaxTokens int           `json:"max_completion_tokens,omitempty"`
			Messages  []message     `json:"messages"`
		}{model, true, streamOptions{IncludeUsage: true}, maxTokens, messages}
	}
	b, _ := json.Marshal(v) // strings and ints always marshal
	return b
}

// setHeaders sets the API's own headers; the caller's come after and win.
func setHeaders(h http.Header, api API) {
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "text/event-stream")
	if api == Anthropic {
		h.Set("anthropic-version", AnthropicVersion)
	}
}

// eventKind is what one event means to the client.
type eventKind int

const (
	eventOther   eventKind = iota // metadata, keep-alive, role-only delta
	eventContent                  // carries generated output of any kind
	eventDone                     // the API's normal end of stream
	eventError                    // an error reported inside the stream
)

// readEvent interprets one event of api's stream, recording the id, model
// and reported output tokens in r as they appear.
func readEvent(api API, typ, data []byte, r *Result) eventKind {
	if api == Anthropic {
		return readAnthropicEvent(typ, data, r)
	}
	return readOpenAIEvent(data, r)
}

var doneData = []byte("[DONE]")

// view is b as a string without a copy, for parsing an event in place:
// the client reads thousands of events a second, and a copy of each is
// garbage whose collections hold a core and make scheduled requests start
// late. A string kept past the event is cloned from it.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// readOpenAIEvent reads a chat.completion.chunk. Output is any non-empty
// text, reasoning or refusal delta or any tool-call delta, as tokentap
// counts the first token; the role-only first chunk is not output.
func readOpenAIEvent(data []byte, r *Result) eventKind {
	if bytes.Equal(bytes.TrimSpace(data), doneData) {
		return eventDone
	}
	ev := gjson.Parse(view(data))
	if e := ev.Get("error"); e.Exists() && e.Type != gjson.Null {
		r.StreamError = strings.Clone(e.Get("message").String())
		if r.StreamError == "" {
			r.StreamError = strings.Clone(e.Raw)
		}
		return eventError
	}
	if r.ResponseID == "" {
		r.ResponseID = strings.Clone(ev.Get("id").String())
	}
	if r.ResponseModel == "" {
		r.ResponseModel = strings.Clone(ev.Get("model").String())
	}
	if u := ev.Get("usage.completion_tokens"); u.Type == gjson.Number {
		r.OutputTokens, r.UsageReported = int(u.Int()), true
	}
	kind := eventOther
	ev.Get("choices").ForEach(func(_, c gjson.Result) bool {
		d := c.Get("delta")
		// Without a kept text the first output decides; with one, every
		// kind of output in the delta is text to count.
		for _, k := range []string{"content", "reasoning_content", "reasoning", "refusal"} {
			if s := d.Get(k).String(); s != "" {
				kind = eventContent
				if r.text == nil {
					return false
				}
				r.appendText(s)
			}
		}
		if tc := d.Get("tool_calls"); tc.IsArray() && len(tc.Array()) > 0 {
			kind = eventContent
			if r.text == nil {
				return false
			}
			tc.ForEach(func(_, call gjson.Result) bool {
				r.appendText(call.Get("function.arguments").String())
				return true
			})
		}
		return true
	})
	return kind
}

// readAnthropicEvent reads a Messages stream event, typed by its event:
// line or, failing that, its data's type.
func readAnthropicEvent(typ, data []byte, r *Result) eventKind {
	ev := gjson.Parse(view(data))
	name := view(typ)
	if name == "" {
		name = ev.Get("type").String()
	}
	switch name {
	case "message_start":
		if r.ResponseID == "" {
			r.ResponseID = strings.Clone(ev.Get("message.id").String())
		}
		if r.ResponseModel == "" {
			r.ResponseModel = strings.Clone(ev.Get("message.model").String())
		}
	case "content_block_delta":
		d := ev.Get("delta")
		for _, k := range []string{"text", "thinking", "partial_json"} {
			if s := d.Get(k).String(); s != "" {
				r.appendText(s)
				return eventContent
			}
		}
	case "message_delta":
		// Its usage is cumulative: the last one is the final count.
		if u := ev.Get("usage.output_tokens"); u.Type == gjson.Number {
			r.OutputTokens, r.UsageReported = int(u.Int()), true
		}
	case "message_stop":
		return eventDone
	case "error":
		r.StreamError = strings.Clone(ev.Get("error.message").String())
		if r.StreamError == "" {
			r.StreamError = string(data)
		}
		return eventError
	}
	return eventOther
}
