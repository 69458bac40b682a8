package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tokentap/tokentap/internal/simulator"
)

// TestMeanInterval checks the Student-t interval against values worked by
// hand with the t table's 97.5 % quantiles (12.7062 for 1 degree of
// freedom, 4.3027 for 2, 2.7764 for 4, 2.2622 for 9).
func TestMeanInterval(t *testing.T) {
	for _, tc := range []struct {
		name        string
		values      []float64
		mean        float64
		interval    bool
		stdev, half float64
	}{
		{name: "no value", values: nil},
		{name: "one value: no interval", values: []float64{5}, mean: 5},
		{name: "two values", values: []float64{1, 3}, mean: 2, interval: true, stdev: math.Sqrt2, half: 12.7062},
		{name: "three equal values", values: []float64{2, 2, 2}, mean: 2, interval: true},
		{name: "three values", values: []float64{40, 50, 60}, mean: 50, interval: true, stdev: 10, half: 4.3027 * 10 / math.Sqrt(3)},
		// mean 8, s = √5, half-width 2.7764 · √5 / √5: from 5.2236 to 10.7764.
		{name: "five values", values: []float64{5, 7, 8, 9, 11}, mean: 8, interval: true, stdev: math.Sqrt(5), half: 2.7764},
		// 1 to 10: mean 5.5, s = 3.0277, half-width 2.2622 · 3.0277 / √10 = 2.1659.
		{name: "ten values", values: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, mean: 5.5, interval: true, stdev: 3.0277, half: 2.1659},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iv := NewMeanInterval(tc.values)
			near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-4*max(1, math.Abs(want)) }
			if iv.N != len(tc.values) || !near(iv.Mean, tc.mean) {
				t.Errorf("n %d, mean %v; want %d, %v", iv.N, iv.Mean, len(tc.values), tc.mean)
			}
			if !tc.interval {
				if iv.Stdev != nil || iv.HalfWidth != nil || iv.CILow != nil || iv.CIHigh != nil {
					t.Errorf("an interval from %d values: %+v", len(tc.values), iv)
				}
				return
			}
			if iv.Stdev == nil || iv.HalfWidth == nil || iv.CILow == nil || iv.CIHigh == nil {
				t.Fatalf("no interval from %d values", len(tc.values))
			}
			if !near(*iv.Stdev, tc.stdev) || !near(*iv.HalfWidth, tc.half) ||
				!near(*iv.CILow, tc.mean-tc.half) || !near(*iv.CIHigh, tc.mean+tc.half) {
				t.Errorf("stdev %v, %v ± %v from %v to %v; want %v, %v ± %v", *iv.Stdev, iv.Mean, *iv.HalfWidth, *iv.CILow, *iv.CIHigh,
					tc.stdev, tc.mean, tc.half)
			}
		})
	}
}

// TestSummarise: a figure counts once per run in which it was defined; a
// run whose requests all failed has no time to first token but a
// throughput of zero.
func TestSummarise(t *testing.T) {
	run := func(ttft float64, ok, failed int, throughput float64) *Report {
		m := ModelReport{Model: "m", Requests: ok + failed, Succeeded: ok, Failed: failed, Throughput: throughput}
		if ok > 0 {
			m.TimeToFirstToken = Quantiles{Count: ok, P50: ttft, P95: 2 * ttft}
			m.OutputTokensPerSecond = Quantiles{Count: ok, P50: 100, P95: 120}
		}
		return &Report{Models: []ModelReport{m}}
	}
	for _, tc := range []struct {
		name                string
		runs                []*Report
		ttftN, thrN         int
		ttftMean, thrMean   float64
		succeeded, failedSo int
	}{
		{name: "no run", runs: nil},
		{name: "three runs", runs: []*Report{run(0.1, 2, 0, 30), run(0.2, 2, 0, 30), run(0.3, 1, 1, 15)},
			ttftN: 3, thrN: 3, ttftMean: 0.2, thrMean: 25, succeeded: 5, failedSo: 1},
		{name: "a run with every request failed", runs: []*Report{run(0.1, 2, 0, 30), run(0, 0, 2, 0), run(0.3, 2, 0, 30)},
			ttftN: 2, thrN: 3, ttftMean: 0.2, thrMean: 20, succeeded: 4, failedSo: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := summarise(tc.runs)
			if s.Confidence != 0.95 || s.Method != "student_t" {
				t.Errorf("confidence %v, method %q", s.Confidence, s.Method)
			}
			if len(tc.runs) == 0 {
				if s.Models == nil || len(s.Models) != 0 {
					t.Errorf("models %#v, want an empty list", s.Models)
				}
				return
			}
			m := s.Models[0]
			if m.TTFTP50.N != tc.ttftN || m.TPSP95.N != tc.ttftN || m.Throughput.N != tc.thrN ||
				math.Abs(m.TTFTP50.Mean-tc.ttftMean) > 1e-9 || math.Abs(m.TTFTP95.Mean-2*tc.ttftMean) > 1e-9 ||
				math.Abs(m.Throughput.Mean-tc.thrMean) > 1e-9 || m.Succeeded != tc.succeeded || m.Failed != tc.failedSo {
				t.Errorf("summary %+v", m)
			}
		})
	}
}

func TestRepeatTable(t *testing.T) {
	one := &Report{API: OpenAI, URL: "http://x/v1/chat/completions", Concurrency: 2, Models: []ModelReport{{
		Model: "m", Requests: 4, Succeeded: 4, Throughput: 80,
		TimeToFirstToken:      Quantiles{Count: 4, P50: 0.020, P95: 0.025},
		OutputTokensPerSecond: Quantiles{Count: 4, P50: 100, P95: 110},
	}}}
	slower := *one
	slower.Models = slices.Clone(one.Models)
	slower.Models[0].TimeToFirstToken.P50 = 0.030
	slower.Models[0].Errors = map[string]int{ErrTimeout: 1}
	for _, tc := range []struct {
		name string
		rr   *RepeatReport
		want []string
		not  []string
	}{
		{name: "one repetition: means alone", rr: &RepeatReport{Repeat: 1, Seeds: []uint64{4}, Runs: []*Report{one}},
			want: []string{"concurrency 2, 1 repetition (seed 4)", "20.0  ", "one repetition gives no interval"}, not: []string{"20.0 ±"}},
		{name: "two whole repetitions of three", rr: &RepeatReport{Repeat: 3, Seeds: []uint64{0, 1, 2}, Runs: []*Report{one, &slower, one}, Stopped: true},
			// mean 25 ms, half-width 12.7062 · 7.0711 / √2 = 63.5 ms.
			want: []string{"25.0 ± 63.5", "stopped during repetition 3 of 3", "failed: repetition 2 m: 1 timeout", "95 % Student-t"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := tc.rr.Runs
			if tc.rr.Stopped {
				runs = runs[:len(runs)-1] // as RunRepeat leaves the cut run out
			}
			tc.rr.Summary = summarise(runs)
			var b strings.Builder
			if err := tc.rr.WriteTable(&b); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("table lacks %q:\n%s", w, b.String())
				}
			}
			for _, w := range tc.not {
				if strings.Contains(b.String(), w) {
					t.Errorf("table has %q:\n%s", w, b.String())
				}
			}
		})
	}
}

func TestRunRepeatErrors(t *testing.T) {
	valid := Config{URL: "http://127.0.0.1:1", Models: []string{"m"}, Requests: 1}
	for _, tc := range []struct {
		name    string
		cfg     Config
		n       int
		prepare func(int, *Config) error
		want    string
	}{
		{name: "zero repetitions", cfg: valid, n: 0, want: "repeat must be 1 to 100 runs, got 0"},
		{name: "too many", cfg: valid, n: 101, want: "repeat must be 1 to 100 runs, got 101"},
		{name: "invalid config", cfg: Config{Models: []string{"m"}, Requests: 1}, n: 2, want: "repetition 1: a URL is required"},
		{name: "prepare fails", cfg: valid, n: 2, prepare: func(int, *Config) error { return errors.New("no prompts") }, want: "repetition 1: no prompts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RunRepeat(context.Background(), tc.cfg, tc.n, tc.prepare)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRunRepeat runs three repetitions against the simulator: each run
// whole, with its own seed, and the summary's intervals around what the
// simulator was configured to do.
func TestRunRepeat(t *testing.T) {
	base := startSimulator(t, simulator.Handler{})
	for _, tc := range []struct {
		name string
		cfg  Config
		// ttft is each repetition's configured time to first token, sent
		// in the simulator's header; nil keeps the models' own.
		ttft  []time.Duration
		check func(t *testing.T, rr *RepeatReport)
	}{
		{
			name: "the models' fixed speeds",
			cfg:  Config{Models: []string{"fast", "slow"}, Concurrency: 2, Requests: 6, Seed: 7},
			check: func(t *testing.T, rr *RepeatReport) {
				// A fixed speed measured three times varies by the
				// machine only: the interval sits just above it.
				for i, want := range []struct {
					ttft time.Duration
					rate float64
				}{{fastTTFT, fastRate}, {slowTTFT, slowRate}} {
					m := rr.Summary.Models[i]
					if m.TTFTP50.CILow == nil || *m.TTFTP50.CILow > m.TTFTP50.Mean || *m.TTFTP50.CIHigh < m.TTFTP50.Mean {
						t.Fatalf("%s: no interval around the mean: %+v", m.Model, m.TTFTP50)
					}
					if mean := time.Duration(m.TTFTP50.Mean * 1e9); mean < want.ttft || mean > want.ttft+ttftSlack {
						t.Errorf("%s: TTFT p50 %s over the runs, configured %s", m.Model, mean, want.ttft)
					}
					if r := m.TPSP50.Mean; math.Abs(r-want.rate) > rateSlack*want.rate {
						t.Errorf("%s: tok/s p50 %.1f over the runs, configured %.0f", m.Model, r, want.rate)
					}
				}
			},
		},
		{
			name: "time to first token varied by repetition",
			cfg:  Config{Models: []string{"fast"}, Concurrency: 2, Requests: 4},
			ttft: []time.Duration{40 * time.Millisecond, 50 * time.Millisecond, 60 * time.Millisecond},
			check: func(t *testing.T, rr *RepeatReport) {
				// The runs' mean, 50 ms, lies inside the interval of
				// their measured medians.
				iv := rr.Summary.Models[0].TTFTP50
				if iv.CILow == nil || *iv.CILow > 0.050 || *iv.CIHigh < 0.050 {
					t.Errorf("TTFT p50 interval %+v does not hold the configured mean of 50 ms", iv)
				}
				if iv.Stdev == nil || *iv.Stdev < 0.005 {
					t.Errorf("TTFT p50 stdev %v: the repetitions did not differ", iv.Stdev)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.URL = base
			var seeds []uint64
			rr, err := RunRepeat(context.Background(), cfg, 3, func(i int, c *Config) error {
				seeds = append(seeds, c.Seed)
				if tc.ttft != nil {
					c.Header = http.Header{simulator.HeaderTimeToFirstToken: {tc.ttft[i].String()}}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			wantSeeds := []uint64{cfg.Seed, cfg.Seed + 1, cfg.Seed + 2}
			if !slices.Equal(seeds, wantSeeds) || !slices.Equal(rr.Seeds, wantSeeds) {
				t.Errorf("seeds given %v, reported %v; want %v", seeds, rr.Seeds, wantSeeds)
			}
			if rr.Repeat != 3 || len(rr.Runs) != 3 || rr.Stopped {
				t.Fatalf("repeat %d, %d runs, stopped %v", rr.Repeat, len(rr.Runs), rr.Stopped)
			}
			for i, rep := range rr.Runs {
				if rep.Total.Requests != cfg.Requests || rep.Total.Succeeded != cfg.Requests {
					t.Errorf("run %d: %d requests, %d succeeded; want %d", i, rep.Total.Requests, rep.Total.Succeeded, cfg.Requests)
				}
			}
			if len(rr.Summary.Models) != len(cfg.Models) {
				t.Fatalf("%d models summarised, want %d", len(rr.Summary.Models), len(cfg.Models))
			}
			for i, m := range rr.Summary.Models {
				if m.Model != cfg.Models[i] || m.Succeeded != 3*cfg.Requests/len(cfg.Models) {
					t.Errorf("model %d: %q with %d succeeded", i, m.Model, m.Succeeded)
				}
				for name, iv := range map[string]MeanInterval{"ttft p50": m.TTFTP50, "ttft p95": m.TTFTP95, "tps p50": m.TPSP50, "tps p95": m.TPSP95, "throughput": m.Throughput} {
					if iv.N != 3 || iv.HalfWidth == nil || math.Abs(*iv.CIHigh-*iv.CILow-2**iv.HalfWidth) > 1e-9 {
						t.Errorf("%s %s: %+v", m.Model, name, iv)
					}
				}
			}
			tc.check(t, rr)

			raw, err := json.Marshal(rr)
			if err != nil {
				t.Fatal(err)
			}
			for _, path := range []string{"repeat", "seeds.2", "runs.2.models.0.time_to_first_token_seconds.p50", "summary.confidence",
				"summary.models.0.ttft_seconds_p50.ci_low", "summary.models.0.ttft_seconds_p95.half_width",
				"summary.models.0.output_tokens_per_second_p50.stdev", "summary.models.0.throughput_tokens_per_second.ci_high"} {
				if !gjson.GetBytes(raw, path).Exists() {
					t.Errorf("JSON lacks %s", path)
				}
			}
			var table strings.Builder
			if err := rr.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("3 repetitions (seeds %d to %d)", cfg.Seed, cfg.Seed+2); !strings.Contains(table.String(), want) ||
				!strings.Contains(table.String(), " ± ") {
				t.Errorf("table lacks %q or a ±:\n%s", want, table.String())
			}
		})
	}
}

// TestRunRepeatStopped: a stopped run ends the repetitions, and the run it
// cut short is reported but not summarised.
func TestRunRepeatStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rr, err := RunRepeat(ctx, Config{URL: "http://127.0.0.1:1", Models: []string{"m"}, Requests: 5}, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rr.Stopped || len(rr.Runs) != 1 || len(rr.Summary.Models) != 0 {
		t.Errorf("stopped %v, %d runs, %d models summarised; want true, 1, 0", rr.Stopped, len(rr.Runs), len(rr.Summary.Models))
	}
}
