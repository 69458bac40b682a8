package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/tokentap/tokentap/internal/loadreport"
)

// loadCompareCommand is `tokentap load compare`: a subcommand of load,
// since Caddy's command names cannot have a space.
func loadCompareCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "compare <a.json> <b.json> [<more.json>...] [--report <file>.html] [--json]",
		Short: "Compares reports of tokentap load --json side by side, per model",
		Long: `
Reads reports written by tokentap load --json (single runs, or sweeps,
which have "levels") and prints, per model, each run's time to first token
and output tokens/s (p50 and p95), its throughput and failures, and the
relative change of each later run against the first, the baseline.

Single runs compare with single runs; sweeps with sweeps over the same
parameter, level by level. Models are matched by name.

--report writes the same comparison as one self-contained HTML file of
charts (distributions, over time, against load for sweeps), the runs side
by side on the same axes. --json prints the comparison as JSON instead of
the table.

  tokentap load --url http://localhost:8080/sim/v1 --model sim-fast --requests 64 --json > a.json
  tokentap load --url http://localhost:8080/sim/v1 --model sim-fast --requests 64 --concurrency 8 --json > b.json
  tokentap load compare a.json b.json --report compare.html
`,
	}
	cmd.Flags().String("report", "", "also write the comparison as a self-contained HTML file of charts")
	cmd.Flags().Bool("json", false, "print the comparison as JSON instead of a table")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
			return runCompare(args, fl, cmd.OutOrStdout())
		})(cmd, args)
	}
	return cmd
}

// runCompare compares the reports in the files named by args.
func runCompare(args []string, fl caddycmd.Flags, out io.Writer) (int, error) {
	if len(args) < 2 {
		return failed(fmt.Errorf("compare needs two reports or more, got %d: tokentap load compare a.json b.json", len(args)))
	}
	report := fl.String("report")
	if err := checkReportPath(report); err != nil {
		return failed(err)
	}
	var runs []loadreport.Run
	for _, path := range args {
		data, err := os.ReadFile(path)
		if err != nil {
			return failed(fmt.Errorf("reading a report: %w", err))
		}
		run, err := loadreport.ReadRun(path, data)
		if err != nil {
			return failed(err)
		}
		runs = append(runs, run)
	}
	c, err := loadreport.Compare(runs)
	if err != nil {
		return failed(err)
	}
	if err := writeOutput(out, fl.Bool("json"), c); err != nil {
		return failed(fmt.Errorf("writing the comparison: %w", err))
	}
	if report != "" {
		if err := writeReportFile(report, "tokentap load compare: "+strings.Join(args, ", "), runs); err != nil {
			return failed(err)
		}
	}
	return 0, nil
}
