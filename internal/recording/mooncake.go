package recording

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"math"
	"time"

	"github.com/tidwall/gjson"
)

// MooncakeBlockTokens is the tokens each of a mooncake trace's hash_ids
// stands for: Mooncake's published traces cut prompts into blocks of 512
// (ceil(input_length / 512) ids a line), and AIPerf makes prompts from
// them the same way.
const MooncakeBlockTokens = 512

// decodeMooncake reads one line of a mooncake trace. AIPerf's text_input
// (the exact prompt) is kept as the line's input.
func decodeMooncake(b []byte) (Line, error) {
	var l Line
	ts := gjson.GetBytes(b, "timestamp")
	if ts.Type != gjson.Number || ts.Float() < 0 || math.IsInf(ts.Float(), 0) {
		return l, errors.New(`"timestamp" is not a number of milliseconds at least 0`)
	}
	l.Start = time.UnixMilli(0).UTC().Add(time.Duration(ts.Float() * float64(time.Millisecond)))
	l.Outcome = ""
	l.InputTokens, l.OutputTokens = -1, -1
	if in := gjson.GetBytes(b, "input_length"); in.Exists() {
		if in.Type != gjson.Number || in.Int() < 1 || float64(in.Int()) != in.Float() {
			return l, errors.New(`"input_length" is not a whole number of tokens at least 1`)
		}
		l.InputTokens = in.Int()
	}
	if text := gjson.GetBytes(b, "text_input"); text.Exists() {
		if text.Type != gjson.String {
			return l, errors.New(`"text_input" is not a string`)
		}
		msg, _ := json.Marshal([]map[string]any{{"role": "user", "parts": []map[string]string{{"type": "text", "content": text.String()}}}})
		l.Input = msg
	}
	if l.InputTokens < 0 && l.Input == nil {
		return l, errors.New(`neither "input_length" nor "text_input"`)
	}
	if out := gjson.GetBytes(b, "output_length"); out.Exists() {
		if out.Type != gjson.Number || out.Int() < 1 || float64(out.Int()) != out.Float() {
			return l, errors.New(`"output_length" is not a whole number of tokens at least 1`)
		}
		l.OutputTokens, l.MaxTokens = out.Int(), out.Int()
		l.OutputTokensSource = string(Mooncake)
	}
	if ids := gjson.GetBytes(b, "hash_ids"); ids.Exists() {
		if !ids.IsArray() {
			return l, errors.New(`"hash_ids" is not an array`)
		}
		for _, id := range ids.Array() {
			if id.Type != gjson.Number || float64(id.Int()) != id.Float() || id.Int() < 0 || id.Int() > math.MaxInt32 {
				return l, errors.New(`"hash_ids" holds something other than whole numbers at least 0`)
			}
			l.HashIDs = append(l.HashIDs, int(id.Int()))
		}
		if l.InputTokens > 0 && int64(len(l.HashIDs)) > (l.InputTokens+MooncakeBlockTokens-1)/MooncakeBlockTokens {
			return l, errors.New(`more "hash_ids" than blocks of 512 tokens in "input_length"`)
		}
	}
	return l, nil
}

// mooncakeLine is one line of a mooncake trace as WriteMooncake writes it.
type mooncakeLine struct {
	Timestamp    int64 `json:"timestamp"`
	InputLength  int64 `json:"input_length"`
	OutputLength int64 `json:"output_length"`
	HashIDs      []int `json:"hash_ids,omitempty"`
}

// WriteMooncake writes lines, sorted by start, as a mooncake trace:
// timestamps in milliseconds from the first line, input and output
// lengths in tokens (the output as generated, else as capped). A line
// whose input or output length is unknown cannot be replayed from the
// trace and is left out; skipped counts them. hash_ids are written only
// for lines that came from a trace: a recording holds no content to hash,
// and made-up ids would claim that no two prompts share a prefix.
func WriteMooncake(w io.Writer, lines []Line) (written, skipped int, err error) {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	origin := Origin(lines)
	for i := range lines {
		l := &lines[i]
		out := l.OutputTokens
		if out < 1 {
			out = l.MaxTokens
		}
		if l.InputTokens < 1 || out < 1 {
			skipped++
			continue
		}
		if err := enc.Encode(mooncakeLine{
			Timestamp:    l.Offset(origin).Milliseconds(),
			InputLength:  l.InputTokens,
			OutputLength: out,
			HashIDs:      l.HashIDs,
		}); err != nil {
			return written, skipped, err
		}
		written++
	}
	return written, skipped, bw.Flush()
}
