package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/pflag"
	"github.com/tidwall/gjson"

	"github.com/tokentap/tokentap/internal/loadgen"
	"github.com/tokentap/tokentap/internal/loadreport"
	"github.com/tokentap/tokentap/internal/recording"
)

// addReplayFlags declares the load command's replay flags.
func addReplayFlags(f *pflag.FlagSet) {
	f.StringArray("replay", nil, "replay a recording (the record option's file, its rotated files too) or a mooncake trace; repeatable")
	f.Float64("time-scale", 1, "with --replay: multiply the recorded arrival offsets by this (0.5 replays twice as fast)")
}

// runReplay replays the --replay files against the one --model and
// reports the recording and the candidate side by side.
func runReplay(ctx context.Context, fl caddycmd.Flags, files []string, out io.Writer) (int, error) {
	if fl.String("sweep") != "" || fl.Changed("rate") || fl.Changed("arrival") || fl.Changed("warmup") ||
		fl.Changed("input-tokens") || fl.Changed("prompts") {
		return failed(fmt.Errorf("--replay sends the recorded requests at their recorded times with their lengths: --sweep, --rate, --arrival, --warmup, --input-tokens and --prompts do not apply"))
	}
	cfg, asJSON, err := loadConfig(fl)
	if err != nil {
		return failed(err)
	}
	if !fl.Changed("requests") {
		cfg.Requests = 0 // every recorded request
	}
	if err := checkReportPath(fl.String("report")); err != nil {
		return failed(err)
	}
	recs, err := readRecorded(files)
	if err != nil {
		return failed(err)
	}
	rr, err := loadgen.Replay(ctx, cfg, recs, fl.Float64("time-scale"))
	if err != nil {
		return failed(err)
	}
	if err := writeOutput(out, asJSON, rr); err != nil {
		return failed(fmt.Errorf("writing the report: %w", err))
	}
	if path := fl.String("report"); path != "" {
		title := fmt.Sprintf("Replay of %s against %s", strings.Join(files, ", "), rr.CandidateModel)
		if err := writeReportFile(path, title, []loadreport.Run{
			{Name: "recorded", Report: rr.Recorded},
			{Name: rr.CandidateModel, Report: rr.Candidate},
		}); err != nil {
			return failed(err)
		}
	}
	if t := rr.Candidate.Total; t.Requests > 0 && t.Succeeded == 0 {
		return 1, fmt.Errorf("every request failed (%d)", t.Requests)
	}
	return 0, nil
}

// readRecorded reads recordings or traces (all of one format) as the
// replay's requests, in arrival order.
func readRecorded(files []string) ([]loadgen.Recorded, error) {
	var lines []recording.Line
	var format recording.Format
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("--replay: %w", err)
		}
		got, ff, err := recording.Read(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("--replay %s: %w", path, err)
		}
		if format != "" && ff != "" && ff != format {
			return nil, fmt.Errorf("--replay %s: a %s file among %s files", path, ff, format)
		}
		if ff != "" {
			format = ff
		}
		lines = append(lines, got...)
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("--replay %s: no request recorded", strings.Join(files, ", "))
	}
	lines = recording.Sorted(lines)
	origin := recording.Origin(lines)
	recs := make([]loadgen.Recorded, len(lines))
	for i := range lines {
		recs[i] = toRecorded(&lines[i], origin)
	}
	return recs, nil
}

// toRecorded is a line as a replay's request, its offset from origin.
func toRecorded(l *recording.Line, origin time.Time) loadgen.Recorded {
	r := loadgen.Recorded{
		At:          l.Offset(origin),
		Model:       l.Model,
		InputTokens: int(max(l.InputTokens, 0)),
		HashIDs:     l.HashIDs,
		MaxTokens:   int(l.MaxTokens),
		Measured:    l.Completed(),
	}
	if len(l.Input) > 0 {
		r.Prompt = promptText(l.Input)
	}
	if l.OutputTokens > 0 {
		r.OutputTokens = int(l.OutputTokens)
	}
	if r.Measured {
		r.TimeToFirstToken = time.Duration(l.TimeToFirstToken * float64(time.Second))
		r.Duration = time.Duration(l.Duration * float64(time.Second))
		r.OutputTokensPerSecond = l.OutputTokensPerSecond
		r.UsageReported = l.OutputTokensSource == "reported" || l.OutputTokensSource == "injected"
	} else if l.Outcome != "" {
		r.Failed = l.Outcome
	}
	return r
}

// promptText is the text of captured input messages (the GenAI
// conventions' JSON), every text part of every message in order: the
// load generator sends one user message, so roles are not kept.
func promptText(input []byte) string {
	var parts []string
	gjson.ParseBytes(input).ForEach(func(_, msg gjson.Result) bool {
		msg.Get("parts").ForEach(func(_, p gjson.Result) bool {
			if p.Get("type").String() == "text" {
				parts = append(parts, p.Get("content").String())
			}
			return true
		})
		return true
	})
	return strings.Join(parts, "\n\n")
}
