package recording

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// MaxLineBytes bounds one line of a recording or trace: captured input is
// bounded by capture_content's size, far below it.
const MaxLineBytes = 64 << 20

// Format names what a file holds.
type Format string

const (
	// Tokentap is a recording written by the record option.
	Tokentap Format = "tokentap"
	// Mooncake is the trace format Mooncake published and AIPerf and
	// GuideLLM replay: {"timestamp": <ms>, "input_length": n,
	// "output_length": n, "hash_ids": [...]} a line.
	Mooncake Format = "mooncake"
)

// Read reads a recording or a mooncake trace, telling them apart by their
// first line (a recording's lines have "start", a trace's "timestamp"),
// and returns its lines sorted by start. A mooncake trace's lines start at
// the Unix epoch plus their timestamp. Blank lines are skipped; any other
// line that is not one of the format's is an error naming its number.
func Read(r io.Reader) ([]Line, Format, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	var (
		lines  []Line
		format Format
		n      int
	)
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if !gjson.ValidBytes(b) || b[0] != '{' {
			return nil, format, fmt.Errorf("line %d: not a JSON object", n)
		}
		if format == "" {
			switch {
			case gjson.GetBytes(b, "start").Exists():
				format = Tokentap
			case gjson.GetBytes(b, "timestamp").Exists():
				format = Mooncake
			default:
				return nil, format, fmt.Errorf("line %d: neither a tokentap recording's line (no \"start\") nor a mooncake trace's (no \"timestamp\")", n)
			}
		}
		var (
			l   Line
			err error
		)
		if format == Tokentap {
			l, err = decodeLine(b)
		} else {
			l, err = decodeMooncake(b)
		}
		if err != nil {
			return nil, format, fmt.Errorf("line %d: %v", n, err)
		}
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, format, fmt.Errorf("line %d: longer than %d MiB", n+1, MaxLineBytes>>20)
		}
		return nil, format, err
	}
	return Sorted(lines), format, nil
}

// Sorted sorts lines by start, in place, and returns them: the order
// they arrived in, which the order they finished in (a recording's) is
// not, and the order to merge several files in.
func Sorted(lines []Line) []Line {
	slices.SortStableFunc(lines, func(a, b Line) int { return a.Start.Compare(b.Start) })
	return lines
}

// decodeLine reads one line of a recording.
func decodeLine(b []byte) (Line, error) {
	var l Line
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&l); err != nil {
		return l, err
	}
	switch {
	case l.Start.IsZero():
		return l, errors.New(`"start" is not a time`)
	case strings.TrimSpace(l.Model) == "":
		return l, errors.New(`no "model"`)
	case l.InputTokens < -1 || l.OutputTokens < -1 || l.MaxTokens < 0:
		return l, errors.New("a token count is negative")
	case l.Duration < 0 || l.TimeToFirstToken < 0 || l.OutputTokensPerSecond < 0:
		return l, errors.New("a time or rate is negative")
	}
	return l, nil
}

// Origin is the earliest start of lines sorted by start, from which their
// arrival offsets count.
func Origin(lines []Line) time.Time {
	if len(lines) == 0 {
		return time.Time{}
	}
	return lines[0].Start
}
