package loadgen

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// maxPromptLine bounds one line of a prompts file; a prompt that large
// (1 MiB) is already beyond any context window worth load testing.
const maxPromptLine = 1 << 20

// ReadPrompts reads a prompts file: one prompt per line, blank lines and
// lines starting with # skipped. A line that starts with a double quote is
// a JSON string, so that a prompt can hold newlines ("line one\nline two").
func ReadPrompts(r io.Reader) ([]string, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxPromptLine)
	var prompts []string
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, `"`):
			var p string
			if err := json.Unmarshal([]byte(line), &p); err != nil {
				return nil, fmt.Errorf("line %d: a line starting with a quote must be one JSON string: %w", n, err)
			}
			line = p
		}
		prompts = append(prompts, line)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("a line is longer than %d bytes", maxPromptLine)
		}
		return nil, err
	}
	if len(prompts) == 0 {
		return nil, errors.New("no prompts: every line is blank or a # comment")
	}
	return prompts, nil
}
