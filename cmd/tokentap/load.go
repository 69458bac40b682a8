package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/tokentap/tokentap/internal/loadgen"
)

// defaultLoadRequests bounds a run given neither --requests nor
// --duration: a load generator must never run without end by accident.
const defaultLoadRequests = 100

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "load",
		Usage: "--url <url> --model <name> [--model <name>...] [--api openai|anthropic] [--concurrency <n> | --rate <per second> [--arrival constant|poisson] [--burstiness <b>] [--seed <n>]] [--sweep concurrency=<n,...>|rate=<r,...>] [--repeat <n>] [--warmup <n>] [--input-tokens <mean>[,<stdev>]] [--tokenizer o200k_base|cl100k_base|none] [--slo ttft=<d>,tps=<n>] [--requests <n>] [--duration <d>] [--prompts <file>] [--max-tokens <n>] [--header 'Name: value'...] [--timeout <d>] [--json] [--report <file>.html] [--replay <file>... [--time-scale <k>]]",
		Short: "Sends streaming load to an LLM API and reports TTFT, tokens/s and inter-token latency per model",
		Long: `
Sends streaming chat requests to an OpenAI Chat Completions or Anthropic
Messages endpoint and reports what the client measured, per model: time to
first token, output tokens per second ((tokens - 1) / (last token - first
token), as tokentap measures it) and inter-token latency (the gap between
chunks that carry output), each at p50, p95 and p99.

--url is the endpoint's full URL or a base URL as the SDKs take it
(http://localhost:8080/openai/v1 for OpenAI, https://api.anthropic.com for
Anthropic). --model may be repeated: requests go to the models in turn, so
that all share the same conditions.

Load is closed-loop by default: --concurrency clients (default 1) each send
their next request when the last one ends. --rate starts requests at a fixed
rate instead, with --concurrency capping those in flight (default 256).
--arrival poisson spaces --rate's requests by gaps drawn from a gamma
distribution of mean 1/rate and shape --burstiness: 1 (the default) is a
Poisson process, as independent users make; below 1 the requests come in
bursts. --seed repeats the draws exactly. --warmup sends that many requests
first and leaves them out of the report. With --rate or --replay, one
connection per request due in the first second (at most 64, none through a
proxy) is opened before the clock starts, so that a burst at the start is
not held up by its own connection setup; later requests open theirs as they
need them, within their time to first token.

--input-tokens 500,100 makes prompts whose lengths are drawn from a normal
distribution of mean 500 and standard deviation 100 tokens, each counted
with --tokenizer (o200k_base, or cl100k_base); the report counts the
requests whose reported output length is not the --max-tokens asked for.

The report gives three output tokens/s: per request after the first token
(tok/s, tokentap's definition), per request over the whole request, time
to first token included (e2e tok/s), and every token over the run's time
(tok/s total). --slo ttft=500ms,tps=30 adds goodput: the share of requests
that met it and their tokens over the run's time. The report warns when
the generator itself used most of the CPU.

Where the server reported usage, the report also counts the streamed
output text with --tokenizer and gives, per model, the reported and the
counted output tokens and their relative difference (usage_vs_tokenizer).
A model whose own tokenizer is not that one (Claude, Llama) differs by
the tokenizers, which is not an error.

--sweep runs the load at each level in turn, e.g. --sweep concurrency=1,2,4,8
or --sweep rate=0.5,1,2,4 (with --arrival), each level a whole run (its
warm-up included); the report has one table per level, or with --json
{"sweep": ..., "levels": [report, ...]}.

--repeat 5 runs the same load five times in turn, each a whole run (its
warm-up included), repetition i with seed --seed + i (its arrivals and
--input-tokens lengths drawn afresh), and reports per model the mean over
the runs of TTFT and tok/s at p50 and p95 and of tok/s total, each ± the
half-width of its 95 % Student-t interval: the variation from run to run,
not within a run (one run gives no interval). With --json:
{"repeat": 5, "seeds": [...], "runs": [report, ...], "summary": {...}}.
--repeat does not combine with --sweep, --replay or --report.

--replay <file> replays a recording (the tokentap directive's record
option; name its rotated files too) or a mooncake trace against the one
--model: each request at its recorded arrival times --time-scale, with its
recorded prompt (when content was captured) or a prompt of its recorded
input length, and its recorded output length as its cap. The report sets
the recorded measurements and the candidate's side by side per recorded
model; tokentap mooncake converts a recording to a mooncake trace.

A run is always bounded: by --requests, --duration or both (with neither,
100 requests). Requests in flight when --duration ends run to their end,
each bounded by --timeout.

--prompts names a file of prompts, one per line (blank lines and # comments
skipped; a line starting with a double quote is a JSON string, for prompts
with newlines). --header adds a header to every request, e.g.
--header "Authorization: Bearer $OPENAI_API_KEY" or
--header "x-api-key: $ANTHROPIC_API_KEY".

The report is a table on standard output, or JSON with --json; --report
also writes it as one self-contained HTML file of charts (distributions,
over the run's time, against load for a sweep). tokentap load compare
sets reports written with --json side by side. Ctrl-C stops the run and
reports what finished. The exit status is 1 when every
request failed.

Against the built-in simulator of the default Caddyfile, through tokentap:

  tokentap load --url http://localhost:8080/sim/v1 --model sim-fast --model sim-slow --concurrency 8 --requests 64
`,
		CobraFunc: func(cmd *cobra.Command) {
			addLoadFlags(cmd)
			cmd.AddCommand(loadCompareCommand())
			cmd.RunE = caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return runLoad(ctx, fl, cmd.OutOrStdout())
			})
		},
	})
}

// addLoadFlags declares the load command's flags.
func addLoadFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.String("url", "", "endpoint URL, or a base URL as the SDKs take it (required)")
	f.String("api", string(loadgen.OpenAI), "wire format: openai (Chat Completions) or anthropic (Messages)")
	f.StringArray("model", nil, "model to request; repeat for several models in one run (required)")
	f.Int("concurrency", 0, "concurrent clients; with --rate, the cap on requests in flight (default 1, or 256 with --rate)")
	f.Float64("rate", 0, "start requests at this many per second instead of a fixed concurrency")
	f.Int("requests", 0, "number of requests to send (default 100 when --duration is not given either)")
	f.Duration("duration", 0, "time during which requests are started, e.g. 30s or 5m")
	f.Duration("timeout", loadgen.DefaultTimeout, "bound on one request, from sending it to the end of its stream")
	f.String("prompts", "", "file of prompts, one per line")
	f.Int("max-tokens", 0, "output cap per request (max_completion_tokens / max_tokens); 0 sends none for OpenAI, 1024 for Anthropic")
	f.StringArray("header", nil, `header for every request, "Name: value"; repeatable`)
	f.String("arrival", "constant", "with --rate: constant, or poisson (gamma-distributed gaps, shape --burstiness)")
	f.Float64("burstiness", 1, "with --arrival poisson: 1 is a Poisson process, below 1 burstier, above 1 more even")
	f.String("seed", "0", "seed of the arrival draws (a whole number), to repeat a run exactly")
	f.Int("warmup", 0, "requests sent first (per level with --sweep) and left out of the report")
	f.String("input-tokens", "", "prompts of this many tokens, mean[,stdev] (counted with --tokenizer), instead of --prompts")
	f.String("tokenizer", "o200k_base", "the encoding --input-tokens counts in, and the report's output tokens against usage: o200k_base, cl100k_base, or none (no count against usage; not with --input-tokens)")
	f.String("slo", "", "objective for the report's goodput: ttft=500ms,tps=30 (either or both)")
	f.String("sweep", "", "run each level in turn: concurrency=1,2,4,8 or rate=0.5,1,2,4")
	f.Bool("json", false, "print the report as JSON instead of a table")
	f.String("report", "", "also write the report as a self-contained HTML file of charts")
	addReplayFlags(f)
	addRepeatFlags(f)
}

// runLoad runs the load the flags describe and writes its report to out.
func runLoad(ctx context.Context, fl caddycmd.Flags, out io.Writer) (int, error) {
	if fl.Changed("repeat") {
		return runRepeat(ctx, fl, out)
	}
	if files, _ := fl.GetStringArray("replay"); len(files) > 0 {
		return runReplay(ctx, fl, files, out)
	}
	cfg, asJSON, err := loadConfig(fl)
	if err != nil {
		return failed(err)
	}
	if err := checkReportPath(fl.String("report")); err != nil {
		return failed(err)
	}
	if s := fl.String("sweep"); s != "" {
		return runSweep(ctx, cfg, s, asJSON, fl.String("report"), out)
	}
	rep, err := loadgen.Run(ctx, cfg)
	if err != nil {
		return failed(err)
	}
	if err := writeOutput(out, asJSON, rep); err != nil {
		return failed(fmt.Errorf("writing the report: %w", err))
	}
	if err := writeLoadReport(fl.String("report"), rep, nil); err != nil {
		return failed(err)
	}
	if rep.Total.Requests > 0 && rep.Total.Succeeded == 0 {
		return 1, fmt.Errorf("every request failed (%d)", rep.Total.Requests)
	}
	return 0, nil
}

// runSweep runs cfg at each level of the --sweep flag s.
func runSweep(ctx context.Context, cfg loadgen.Config, s string, asJSON bool, report string, out io.Writer) (int, error) {
	sw, err := loadgen.ParseSweep(s)
	if err != nil {
		return failed(err)
	}
	rep, err := loadgen.RunSweep(ctx, cfg, sw)
	if err != nil {
		return failed(err)
	}
	if err := writeOutput(out, asJSON, rep); err != nil {
		return failed(fmt.Errorf("writing the report: %w", err))
	}
	if err := writeLoadReport(report, nil, rep); err != nil {
		return failed(err)
	}
	for i, l := range rep.Levels {
		if l.Total.Requests > 0 && l.Total.Succeeded == 0 {
			return 1, fmt.Errorf("every request failed at %s %g", sw.Param, sw.Levels[i])
		}
	}
	return 0, nil
}

// failed is the exit status of a run that could not start or report.
func failed(err error) (int, error) { return caddy.ExitCodeFailedStartup, err }

// loadConfig turns the flags into a loadgen.Config.
func loadConfig(fl caddycmd.Flags) (loadgen.Config, bool, error) {
	models, err := fl.GetStringArray("model")
	if err != nil {
		return loadgen.Config{}, false, err
	}
	headers, err := fl.GetStringArray("header")
	if err != nil {
		return loadgen.Config{}, false, err
	}
	cfg := loadgen.Config{
		URL:         fl.String("url"),
		API:         loadgen.API(strings.ToLower(fl.String("api"))),
		Models:      models,
		Concurrency: fl.Int("concurrency"),
		Rate:        fl.Float64("rate"),
		Requests:    fl.Int("requests"),
		Duration:    fl.Duration("duration"),
		Timeout:     fl.Duration("timeout"),
		MaxTokens:   fl.Int("max-tokens"),
		Arrival:     loadgen.Arrival(strings.ToLower(fl.String("arrival"))),
		Burstiness:  fl.Float64("burstiness"),
		Warmup:      fl.Int("warmup"),
		Tokenizer:   fl.String("tokenizer"),
	}
	if cfg.Tokenizer == "none" {
		// Counting the output costs the generator CPU while other
		// requests stream; a run at the edge of the machine can skip it.
		if fl.String("input-tokens") != "" {
			return loadgen.Config{}, false, fmt.Errorf("--input-tokens counts the prompts with --tokenizer: give o200k_base or cl100k_base")
		}
		cfg.Tokenizer = ""
	}
	if cfg.Seed, err = strconv.ParseUint(fl.String("seed"), 10, 64); err != nil {
		return loadgen.Config{}, false, fmt.Errorf("seed: %v", err)
	}
	if v := fl.String("input-tokens"); v != "" {
		if fl.String("prompts") != "" {
			return loadgen.Config{}, false, fmt.Errorf("--input-tokens and --prompts: give one")
		}
		if cfg.Prompts, err = sizedPrompts(v, fl.String("tokenizer"), cfg.Requests+cfg.Warmup, cfg.Seed); err != nil {
			return loadgen.Config{}, false, err
		}
	}
	if v := fl.String("slo"); v != "" {
		if cfg.SLO, err = loadgen.ParseSLO(v); err != nil {
			return loadgen.Config{}, false, err
		}
	}

	if !fl.Changed("requests") && !fl.Changed("duration") {
		cfg.Requests = defaultLoadRequests
	}
	if cfg.Header, err = parseHeaders(headers); err != nil {
		return loadgen.Config{}, false, err
	}
	if path := fl.String("prompts"); path != "" {
		f, err := os.Open(path)
		if err != nil {
			return loadgen.Config{}, false, fmt.Errorf("prompts: %w", err)
		}
		defer f.Close()
		if cfg.Prompts, err = loadgen.ReadPrompts(f); err != nil {
			return loadgen.Config{}, false, fmt.Errorf("prompts %s: %w", path, err)
		}
	}
	return cfg, fl.Bool("json"), nil
}

// maxSizedPrompts bounds the prompts --input-tokens makes: they are used in
// turn, so a long run reuses them.
const maxSizedPrompts = 1000

// sizedPrompts reads --input-tokens mean[,stdev] and makes the prompts, one
// per request up to maxSizedPrompts.
func sizedPrompts(v, encoding string, requests int, seed uint64) ([]string, error) {
	meanText, stdevText, _ := strings.Cut(v, ",")
	mean, err := strconv.Atoi(strings.TrimSpace(meanText))
	stdev := 0
	if err == nil && stdevText != "" {
		stdev, err = strconv.Atoi(strings.TrimSpace(stdevText))
	}
	if err != nil {
		return nil, fmt.Errorf("--input-tokens %q: want mean[,stdev] in tokens, e.g. 500 or 500,100", v)
	}
	n := requests
	if n <= 0 || n > maxSizedPrompts {
		n = maxSizedPrompts
	}
	return loadgen.SizedPrompts(encoding, mean, stdev, n, seed)
}

// parseHeaders reads "Name: value" flags; a value may be empty, a name not.
func parseHeaders(flags []string) (http.Header, error) {
	h := http.Header{}
	for _, f := range flags {
		name, value, ok := strings.Cut(f, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf(`header %q: want "Name: value"`, f)
		}
		h.Add(name, strings.TrimSpace(value))
	}
	return h, nil
}
