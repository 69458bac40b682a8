package main

import (
	"context"
	"fmt"
	"io"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/pflag"

	"github.com/tokentap/tokentap/internal/loadgen"
)

// addRepeatFlags declares the load command's --repeat.
func addRepeatFlags(f *pflag.FlagSet) {
	f.Int("repeat", 1, "run the load this many times in turn (repetition i with --seed + i) and report each p50 and p95's mean with its 95 % Student-t interval")
}

// runRepeat runs the load the flags describe --repeat times and reports
// the runs and their summary.
//
// A sweep is refused rather than repeated per level: its report, which
// the HTML report and load compare read, has one run per level, and a
// sweep of levels times repetitions is long enough that running one
// --repeat per level (--concurrency or --rate) is the better way to get
// it. A replay is refused because its report sets a recording against
// the candidate, which has no per-run summary to make.
func runRepeat(ctx context.Context, fl caddycmd.Flags, out io.Writer) (int, error) {
	n := fl.Int("repeat")
	if files, _ := fl.GetStringArray("replay"); len(files) > 0 {
		return failed(fmt.Errorf("--repeat and --replay: not supported together; replay again and compare the runs"))
	}
	if fl.String("sweep") != "" {
		return failed(fmt.Errorf("--repeat and --sweep: not supported together; run --repeat at each level with --concurrency or --rate"))
	}
	if fl.String("report") != "" {
		return failed(fmt.Errorf("--repeat and --report: the HTML report draws single runs and sweeps; use --json for the repetitions"))
	}
	if n < 1 || n > loadgen.MaxRepeat {
		return failed(fmt.Errorf("--repeat %d: want 1 to %d runs", n, loadgen.MaxRepeat))
	}
	cfg, asJSON, err := loadConfig(fl)
	if err != nil {
		return failed(err)
	}
	// --input-tokens draws its prompt lengths from the seed: each
	// repetition draws its own, as it draws its own arrivals. The first
	// keeps loadConfig's, drawn from the same seed.
	prepare := func(i int, c *loadgen.Config) error {
		v := fl.String("input-tokens")
		if i == 0 || v == "" {
			return nil
		}
		var err error
		c.Prompts, err = sizedPrompts(v, fl.String("tokenizer"), c.Requests+c.Warmup, c.Seed)
		return err
	}
	rr, err := loadgen.RunRepeat(ctx, cfg, n, prepare)
	if err != nil {
		return failed(err)
	}
	if err := writeOutput(out, asJSON, rr); err != nil {
		return failed(fmt.Errorf("writing the report: %w", err))
	}
	for i, rep := range rr.Runs {
		if rep.Total.Requests > 0 && rep.Total.Succeeded == 0 {
			return 1, fmt.Errorf("every request failed in repetition %d", i+1)
		}
	}
	return 0, nil
}
