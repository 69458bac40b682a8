package main

import (
	"fmt"
	"io"
	"os"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	"github.com/tokentap/tokentap/internal/recording"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "mooncake",
		Usage: "<recording file>...",
		Short: "Writes a recording as a mooncake trace, the format AIPerf and GuideLLM replay",
		Long: `
Reads recordings written by the tokentap directive's record option (the
current file and its rotated ones, in any order) and writes them to
standard output as one mooncake trace: a JSON line per request with its
arrival in milliseconds from the first ("timestamp"), its input length
("input_length") and its output length ("output_length", as generated, or
the cap asked for when no count was reported), for AIPerf's or GuideLLM's
trace replay. Requests without an input or output length are left out and
counted on standard error. A recording holds no content to hash, so no
"hash_ids" are written: made-up ids would claim that no two prompts share
a prefix.

tokentap load --replay reads recordings and mooncake traces directly.
`,
		Func: func(fl caddycmd.Flags) (int, error) {
			return writeMooncake(fl.Args(), os.Stdout, os.Stderr)
		},
	})
}

// writeMooncake converts the recordings named by files to a mooncake
// trace on out.
func writeMooncake(files []string, out, errOut io.Writer) (int, error) {
	if len(files) == 0 {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("name the recording files to convert")
	}
	var lines []recording.Line
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return caddy.ExitCodeFailedStartup, err
		}
		got, format, err := recording.Read(f)
		f.Close()
		if err != nil {
			return caddy.ExitCodeFailedStartup, fmt.Errorf("%s: %w", path, err)
		}
		if format == recording.Mooncake {
			return caddy.ExitCodeFailedStartup, fmt.Errorf("%s is a mooncake trace already", path)
		}
		lines = append(lines, got...)
	}
	lines = recording.Sorted(lines)
	written, skipped, err := recording.WriteMooncake(out, lines)
	if err != nil {
		return 1, err
	}
	if skipped > 0 {
		fmt.Fprintf(errOut, "%d of %d requests left out: no input or output length recorded\n", skipped, written+skipped)
	}
	return 0, nil
}
