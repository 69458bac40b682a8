package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/tokentap/tokentap/internal/stats"
)

func init() {
	caddycmd.RegisterCommand(statsCommand)
}

// Limits of `tokentap stats` when it reads an instance.
const (
	// statsFetchTimeout bounds the wait for one instance, so that a hung
	// instance does not hang the command.
	statsFetchTimeout = 15 * time.Second
	// maxSketchesBody bounds one instance's answer: a full store's
	// sketches are a few MiB.
	maxSketchesBody = 64 << 20
)

// statsCommand is `tokentap stats`. It lives in this package, not in
// cmd/tokentap, so that a Caddy built with xcaddy --with tokentap has it
// too.
var statsCommand = caddycmd.Command{
	Name:  "stats",
	Usage: "[--address <admin>] [--from <admin>]... [--window 1m|5m|1h|24h] [--sort <column>] [--series] [--by-inflight] [--json] [--compare <A> <B> [--strata]]",
	Short: "Prints the live model comparison of running tokentap instances",
	Long: `
Prints the live comparison of models measured by running tokentap instances:
one row per provider, model and label values, with requests, error and abort
rates, the share of estimated token counts, and quantiles of time to first
token, output tokens/s, time per output token, duration and token counts.

It reads the instance's admin API (--address, default localhost:2019), or,
with --from given once per instance, the raw sketches of several instances,
which it merges exactly: the result is what one instance that saw all their
traffic would show. Percentiles are never averaged.

--window picks the sliding window: 1m, 5m (default), 1h or 24h.

--series adds each row's time slices (10 s, 30 s, 5 min or 1 h, by window),
oldest first, under the table: how each model moved within the window.

--by-inflight adds each row's time to first token and output tokens/s by
in-flight level (requests to the same upstream and model in flight when a
response began: 1, 2-3, 4-7, ... 64+): how each model slows under load.

--sort names the column to sort by, as in the table's header, in lower case:
ttft_p50 (the default), tps_p5, tps_p50, dur_p95, requests, err%, model...
A leading - sorts descending, e.g. --sort -tps_p50 for the fastest first.
Rows without a value sort last.

--json prints the same JSON as GET /tokentap/stats, the rows in its order.

--compare A B compares two models fairly instead of printing the table:
B over A for time to first token and output tokens/s at p50 and p95,
within cells of (in-flight level x input size), so that a model given the
heavier load or the longer prompts is not judged by them; with a 95 %
interval, the naive ratio of the whole rows beside it, and the share of
each side's requests in the cells compared. A and B each select rows:
model=<name>, provider=<name>, label:<name>=<value>, comma-separated (all
must match), or a bare model name. Windows 5m and 1h only. --strata adds the
per-cell table; --json prints the JSON of GET /tokentap/stats/compare.
`,
	CobraFunc: func(cmd *cobra.Command) {
		cmd.Flags().String("address", caddy.DefaultAdminListen, "The admin API address of the instance to read")
		cmd.Flags().StringArray("from", nil, "The admin API address of an instance to merge; repeat for each instance (overrides --address)")
		cmd.Flags().String("window", stats.DefaultWindow.String(), "The sliding window: 1m, 5m, 1h or 24h")
		cmd.Flags().String("sort", "ttft_p50", "The column to sort by; a leading - sorts descending")
		cmd.Flags().Bool("series", false, "Also print each row's time slices, oldest first")
		cmd.Flags().Bool("by-inflight", false, "Also print each row's speed by in-flight level")
		cmd.Flags().Bool("json", false, "Print JSON (the schema of GET /tokentap/stats) instead of a table")
		cmd.Flags().Bool("compare", false, "Compare two sets of rows, given as the two arguments, within cells of in-flight level and input size")
		cmd.Flags().Bool("strata", false, "With --compare, also print the per-cell table")
		cmd.RunE = caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
			return runStats(fl, cmd.OutOrStdout())
		})
	},
}

// runStats is the command's body, writing to out.
func runStats(fl caddycmd.Flags, out io.Writer) (int, error) {
	win, err := stats.ParseWindow(fl.String("window"))
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	order, err := stats.ParseTableSort(fl.String("sort"))
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	addrs, err := fl.GetStringArray("from")
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if len(addrs) == 0 {
		addrs = []string{fl.String("address")}
	}
	series := fl.Bool("series")
	var sa, sb stats.Selector
	if fl.Bool("compare") {
		if sa, sb, err = compareArgs(fl.Args(), win); err != nil {
			return caddy.ExitCodeFailedStartup, err
		}
	} else if len(fl.Args()) > 0 {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("unexpected arguments %q: only --compare takes arguments", fl.Args())
	}
	merged, err := fetchMerged(addrs, win, series)
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if fl.Bool("compare") {
		return runCompare(merged, sa, sb, fl.Bool("strata"), fl.Bool("json"), out)
	}
	rep := merged.Report(time.Now())
	if fl.Bool("json") {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return caddy.ExitCodeFailedStartup, err
		}
		return caddy.ExitCodeSuccess, nil
	}
	if len(rep.Rows) == 0 {
		_, err = fmt.Fprintf(out, "no requests in the last %s\n", win)
		if err == nil {
			// Requests that have not ended are not in any window: when
			// every stream hangs, this is all there is to see.
			err = stats.WriteLive(out, rep)
		}
	} else {
		err = stats.WriteTable(out, rep, order)
		if err == nil {
			err = stats.WriteLive(out, rep)
		}
		if err == nil && fl.Bool("by-inflight") {
			if _, err = fmt.Fprintf(out, "\nBy requests in flight, over the last half to whole %s:\n", win); err == nil {
				err = stats.WriteInflight(out, rep, order)
			}
		}
		if err == nil && series {
			if _, err = fmt.Fprintf(out, "\nOver the last %s, by slice of %s:\n", win, sliceText(win.Slice())); err == nil {
				err = stats.WriteSeries(out, rep, order)
			}
		}
	}
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	return caddy.ExitCodeSuccess, nil
}

// compareArgs reads --compare's two selectors, and checks that the window
// keeps strata.
func compareArgs(args []string, win stats.Window) (a, b stats.Selector, err error) {
	if len(args) != 2 {
		return a, b, fmt.Errorf("--compare takes two arguments, A and B (e.g. model=gpt-4o model=claude-sonnet-4-5), got %d", len(args))
	}
	if !win.HasStrata() {
		return a, b, fmt.Errorf("--compare: window %s keeps no strata; use 5m or 1h", win)
	}
	if a, err = stats.ParseSelector(args[0]); err != nil {
		return a, b, fmt.Errorf("A: %v", err)
	}
	if b, err = stats.ParseSelector(args[1]); err != nil {
		return a, b, fmt.Errorf("B: %v", err)
	}
	return a, b, nil
}

// runCompare prints the comparison of b with a in merged.
func runCompare(merged *stats.Aggregate, a, b stats.Selector, cells, asJSON bool, out io.Writer) (int, error) {
	cmp, err := merged.Compare(a, b, cells, time.Now())
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		err = enc.Encode(cmp)
	} else {
		err = stats.WriteComparison(out, cmp, cells)
	}
	if err != nil {
		return caddy.ExitCodeFailedStartup, err
	}
	return caddy.ExitCodeSuccess, nil
}

// fetchMerged reads every instance's sketches of window win, at once, and
// merges them.
func fetchMerged(addrs []string, win stats.Window, series bool) (*stats.Aggregate, error) {
	type result struct {
		agg *stats.Aggregate
		err error
	}
	results := make([]chan result, len(addrs))
	for i, addr := range addrs {
		results[i] = make(chan result, 1)
		go func() {
			agg, err := fetchSketches(addr, win, series)
			results[i] <- result{agg, err}
		}()
	}
	var merged *stats.Aggregate
	timeout := time.NewTimer(statsFetchTimeout)
	defer timeout.Stop()
	for i, ch := range results {
		var r result
		select {
		case r = <-ch:
		case <-timeout.C:
			return nil, fmt.Errorf("instance %s: no answer within %s", addrs[i], statsFetchTimeout)
		}
		if r.err != nil {
			return nil, fmt.Errorf("instance %s: %v", addrs[i], r.err)
		}
		if merged == nil {
			merged = r.agg
		} else if err := merged.Merge(r.agg); err != nil {
			return nil, fmt.Errorf("instance %s: %v", addrs[i], err)
		}
	}
	return merged, nil
}

// fetchSketches reads one instance's GET /tokentap/stats/sketches.
func fetchSketches(addr string, win stats.Window, series bool) (*stats.Aggregate, error) {
	// One request per instance: close the connection rather than leave it
	// idle in a transport that is never used again.
	path := "/tokentap/stats/sketches?window=" + url.QueryEscape(win.String())
	if series {
		path += "&series=true"
	}
	resp, err := caddycmd.AdminAPIRequest(addr, http.MethodGet, path,
		http.Header{"Connection": {"close"}}, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxSketchesBody+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxSketchesBody {
		return nil, errors.New("sketches larger than 64 MiB")
	}
	snap, err := stats.ParseSnapshot(b)
	if err != nil {
		return nil, err
	}
	agg, err := snap.Aggregate()
	if err != nil {
		return nil, err
	}
	if agg.Window() != win {
		return nil, fmt.Errorf("answered window %s, asked for %s", agg.Window(), win)
	}
	return agg, nil
}

// sliceText writes a slice's length as the windows are written: 10s, 5m, 1h.
func sliceText(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	default:
		return fmt.Sprintf("%gs", d.Seconds())
	}
}
