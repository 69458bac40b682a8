package loadgen

import (
	"context"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tokentap/tokentap/simulator"
)

// The client's figures come from wall-clock reads on a machine shared with
// other work, so the timing checks allow what a loaded machine adds (a
// scheduling delay on the first token) but not what a wrong measurement
// would give (the other model's speed, a rate off by a factor).
const (
	ttftSlack = 150 * time.Millisecond // added to the time to first token at most
	rateSlack = 0.25                   // relative, on the decode rate and the mean gap
)

type modelWant struct {
	model     string
	requests  int
	succeeded int
	tokens    int64 // output tokens over the completed requests
	usage     int   // requests whose count came from usage
	errors    map[string]int
	// ttft and rate are the simulator's, checked only where a model has
	// three requests whose median can stand a hiccup of the machine.
	ttft time.Duration
	rate float64
}

func TestRun(t *testing.T) {
	base := startSimulator(t, simulator.Handler{})
	for _, tc := range []struct {
		name string
		cfg  Config
		want []modelWant
	}{
		{
			name: "openai, two models in one run",
			cfg:  Config{Models: []string{"fast", "slow"}, Concurrency: 2, Requests: 6},
			want: []modelWant{
				{model: "fast", requests: 3, succeeded: 3, tokens: 3 * tokens, usage: 3, ttft: fastTTFT, rate: fastRate},
				{model: "slow", requests: 3, succeeded: 3, tokens: 3 * tokens, usage: 3, ttft: slowTTFT, rate: slowRate},
			},
		},
		{
			name: "anthropic, two models in one run",
			cfg:  Config{API: Anthropic, Models: []string{"slow", "fast"}, Concurrency: 2, Requests: 6},
			want: []modelWant{
				{model: "slow", requests: 3, succeeded: 3, tokens: 3 * tokens, usage: 3, ttft: slowTTFT, rate: slowRate},
				{model: "fast", requests: 3, succeeded: 3, tokens: 3 * tokens, usage: 3, ttft: fastTTFT, rate: fastRate},
			},
		},
		{
			name: "max tokens caps the output",
			cfg:  Config{Models: []string{"slow"}, Requests: 2, MaxTokens: 5},
			want: []modelWant{{model: "slow", requests: 2, succeeded: 2, tokens: 10, usage: 2}},
		},
		{
			name: "anthropic max tokens",
			cfg:  Config{API: Anthropic, Models: []string{"slow"}, Requests: 1, MaxTokens: 5},
			want: []modelWant{{model: "slow", requests: 1, succeeded: 1, tokens: 5, usage: 1}},
		},
		{
			name: "no usage: tokens counted from events",
			cfg:  Config{Models: []string{"fast"}, Requests: 2, Header: http.Header{simulator.HeaderUsage: {"never"}}},
			want: []modelWant{{model: "fast", requests: 2, succeeded: 2, tokens: 2 * tokens, usage: 0}},
		},
		{
			name: "error status",
			cfg:  Config{Models: []string{"fast"}, Concurrency: 3, Requests: 3, Header: http.Header{simulator.HeaderStatus: {"429"}}},
			want: []modelWant{{model: "fast", requests: 3, errors: map[string]int{"http_429": 3}}},
		},
		{
			name: "openai mid-stream error",
			cfg:  Config{Models: []string{"fast"}, Requests: 2, Header: http.Header{simulator.HeaderErrorAfter: {"3"}}},
			want: []modelWant{{model: "fast", requests: 2, errors: map[string]int{ErrStream: 2}}},
		},
		{
			name: "anthropic mid-stream error",
			cfg:  Config{API: Anthropic, Models: []string{"fast"}, Requests: 1, Header: http.Header{simulator.HeaderErrorAfter: {"3"}}},
			want: []modelWant{{model: "fast", requests: 1, errors: map[string]int{ErrStream: 1}}},
		},
		{
			name: "truncated stream",
			cfg:  Config{Models: []string{"fast"}, Requests: 2, Header: http.Header{simulator.HeaderTruncateAfter: {"3"}}},
			want: []modelWant{{model: "fast", requests: 2, errors: map[string]int{ErrTruncated: 2}}},
		},
		{
			name: "connection cut",
			cfg:  Config{Models: []string{"fast"}, Requests: 1, Header: http.Header{simulator.HeaderAbortAfter: {"3"}}},
			want: []modelWant{{model: "fast", requests: 1, errors: map[string]int{ErrTransport: 1}}},
		},
		{
			name: "request timeout",
			cfg: Config{Models: []string{"fast"}, Requests: 1, Timeout: 50 * time.Millisecond,
				Header: http.Header{simulator.HeaderTimeToFirstToken: {"2s"}}},
			want: []modelWant{{model: "fast", requests: 1, errors: map[string]int{ErrTimeout: 1}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.URL = base
			if cfg.API == Anthropic {
				cfg.URL = base + "/v1"
			}
			var mu sync.Mutex
			var results []*Result
			cfg.OnResult = func(r *Result) {
				mu.Lock()
				results = append(results, r)
				mu.Unlock()
			}
			rep, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Models) != len(tc.want) {
				t.Fatalf("%d models reported, want %d", len(rep.Models), len(tc.want))
			}
			total := 0
			for i, w := range tc.want {
				checkModel(t, rep.Models[i], w, results)
				total += w.requests
			}
			if rep.Total.Requests != total || len(results) != total {
				t.Errorf("total %d requests, %d results; want %d", rep.Total.Requests, len(results), total)
			}
			for _, r := range results {
				if r.OK() && (r.ResponseID == "" || r.ResponseModel != r.Model) {
					t.Errorf("request %d: response id %q, model %q; want an id and model %q", r.Seq, r.ResponseID, r.ResponseModel, r.Model)
				}
				if r.OK() && r.Delays != nil {
					t.Errorf("request %d has delays without stamps: %v", r.Seq, r.Delays)
				}
			}
		})
	}
}

func checkModel(t *testing.T, got ModelReport, w modelWant, results []*Result) {
	t.Helper()
	if got.Model != w.model || got.Requests != w.requests || got.Succeeded != w.succeeded ||
		got.Failed != w.requests-w.succeeded || got.OutputTokens != w.tokens || got.UsageReported != w.usage {
		t.Errorf("%s: %d requests, %d ok, %d failed, %d tokens, %d with usage; want %s: %d, %d, %d, %d, %d",
			got.Model, got.Requests, got.Succeeded, got.Failed, got.OutputTokens, got.UsageReported,
			w.model, w.requests, w.succeeded, w.requests-w.succeeded, w.tokens, w.usage)
	}
	if len(got.Errors) != len(w.errors) {
		t.Errorf("%s: errors %v, want %v", got.Model, got.Errors, w.errors)
	}
	for k, n := range w.errors {
		if got.Errors[k] != n {
			t.Errorf("%s: errors %v, want %v", got.Model, got.Errors, w.errors)
		}
	}
	if w.succeeded == 0 {
		if got.TimeToFirstToken.Count != 0 || got.OutputTokensPerSecond.Count != 0 || got.InterTokenLatency.Count != 0 {
			t.Errorf("%s: failed requests made quantiles: %+v", got.Model, got)
		}
		return
	}
	perRequest := w.tokens / int64(w.succeeded)
	if got.TimeToFirstToken.Count != w.succeeded || got.OutputTokensPerSecond.Count != w.succeeded ||
		got.InterTokenLatency.Count != w.succeeded*int(perRequest-1) {
		t.Errorf("%s: %d TTFT, %d rate, %d gap samples; want %d, %d, %d", got.Model,
			got.TimeToFirstToken.Count, got.OutputTokensPerSecond.Count, got.InterTokenLatency.Count,
			w.succeeded, w.succeeded, w.succeeded*int(perRequest-1))
	}
	if got.Throughput <= 0 {
		t.Errorf("%s: throughput %v", got.Model, got.Throughput)
	}
	// The gaps of a request add up to its span from first to last token,
	// whatever a busy machine did to single gaps, and the mean is exact.
	var span time.Duration
	for _, r := range results {
		if r.Model == w.model && r.OK() {
			span += r.LastToken - r.FirstToken
		}
	}
	if sum := got.InterTokenLatency.Mean * float64(got.InterTokenLatency.Count); math.Abs(sum-span.Seconds()) > 1e-9*span.Seconds() {
		t.Errorf("%s: inter-token latencies add up to %.2f ms, the spans from first to last token to %.2f ms",
			got.Model, sum*1e3, span.Seconds()*1e3)
	}
	if w.rate == 0 {
		return
	}
	ttft := time.Duration(got.TimeToFirstToken.P50 * float64(time.Second))
	// The sketch may place the median up to 0.5 % low.
	if ttft < w.ttft*99/100 || ttft > w.ttft+ttftSlack {
		t.Errorf("%s: time to first token p50 %v, want %v (+ at most %v)", got.Model, ttft, w.ttft, ttftSlack)
	}
	if r := got.OutputTokensPerSecond.P50; math.Abs(r-w.rate)/w.rate > rateSlack {
		t.Errorf("%s: output tokens/s p50 %.1f, want %.1f ± %.0f%%", got.Model, r, w.rate, rateSlack*100)
	}
	if g, want := got.InterTokenLatency.Mean, 1/w.rate; g <= 0 || g > 2*want {
		t.Errorf("%s: mean inter-token latency %.2f ms, want about %.2f ms", got.Model, g*1e3, want*1e3)
	}
}

func TestRunBounds(t *testing.T) {
	base := startSimulator(t, simulator.Handler{})
	// Each request to "slow" for 10 tokens takes 80 ms + 9 tokens at
	// 100/s = 170 ms.
	const perRequest = 170 * time.Millisecond
	for _, tc := range []struct {
		name         string
		cfg          Config
		minRequests  int
		maxRequests  int
		wantLate     bool
		maxElapsed   time.Duration
		wantCanceled bool
		cancelAfter  time.Duration
	}{
		{
			name: "duration bounds a closed loop",
			cfg:  Config{Concurrency: 2, Duration: 400 * time.Millisecond},
			// Two clients start requests for 400 ms: at most 3 rounds each
			// (0, 170, 340 ms), at least 1 each on a machine too busy to
			// keep the schedule.
			minRequests: 2, maxRequests: 6,
			maxElapsed: 400*time.Millisecond + perRequest + ttftSlack,
		},
		{
			name:        "requests bound a long duration",
			cfg:         Config{Concurrency: 3, Requests: 5, Duration: time.Minute},
			minRequests: 5, maxRequests: 5,
			maxElapsed: 2*perRequest + ttftSlack,
		},
		{
			name: "rate starts requests on schedule",
			cfg:  Config{Rate: 40, Duration: 500 * time.Millisecond},
			// 40/s for 500 ms: requests due at 0, 25, ... 475 ms.
			minRequests: 18, maxRequests: 20,
			maxElapsed: 500*time.Millisecond + perRequest + ttftSlack,
		},
		{
			name: "rate beyond the in-flight cap starts late",
			cfg:  Config{Rate: 50, Concurrency: 1, Requests: 3},
			// One at a time, 170 ms each, where the schedule wanted
			// one every 20 ms.
			minRequests: 3, maxRequests: 3, wantLate: true,
			maxElapsed: 3*perRequest + ttftSlack,
		},
		{
			name:        "canceled run stops at once",
			cfg:         Config{Concurrency: 2, Requests: 100, Header: http.Header{simulator.HeaderTimeToFirstToken: {"10s"}}},
			minRequests: 2, maxRequests: 2, wantCanceled: true,
			cancelAfter: 100 * time.Millisecond,
			maxElapsed:  100*time.Millisecond + ttftSlack,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.URL, cfg.Models = base, []string{"slow"}
			if cfg.Header == nil {
				cfg.Header = http.Header{}
			}
			cfg.Header.Set(simulator.HeaderOutputTokens, "10")
			ctx := context.Background()
			if tc.cancelAfter > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.cancelAfter)
				defer cancel()
			}
			began := time.Now()
			rep, err := Run(ctx, cfg)
			took := time.Since(began)
			if err != nil {
				t.Fatal(err)
			}
			n := rep.Total.Requests
			if n < tc.minRequests || n > tc.maxRequests {
				t.Errorf("%d requests, want %d to %d", n, tc.minRequests, tc.maxRequests)
			}
			if took > tc.maxElapsed {
				t.Errorf("the run took %v, want at most %v", took, tc.maxElapsed)
			}
			// Only lateness is checked: on a busy machine a timer can wake
			// more than 10 ms late and make an on-schedule run count one.
			if tc.wantLate && rep.LateStarts == 0 {
				t.Errorf("no late starts, want some")
			}
			if tc.wantCanceled && rep.Total.Errors[ErrCanceled] != n {
				t.Errorf("errors %v, want all %d canceled", rep.Total.Errors, n)
			}
			if !tc.wantCanceled && rep.Total.Failed != 0 {
				t.Errorf("errors %v", rep.Total.Errors)
			}
		})
	}
}

// TestStampedDelays checks that the client dates every event of a stamped
// stream: one delay per event, each the short time a loopback write takes.
func TestStampedDelays(t *testing.T) {
	base := startSimulator(t, simulator.Handler{})
	for _, api := range []API{OpenAI, Anthropic} {
		t.Run(string(api), func(t *testing.T) {
			var results []*Result
			var mu sync.Mutex
			_, err := Run(context.Background(), Config{
				URL: base + "/v1", API: api, Models: []string{"fast"}, Requests: 2,
				Header: http.Header{simulator.HeaderStamp: {"true"}},
				OnResult: func(r *Result) {
					mu.Lock()
					results = append(results, r)
					mu.Unlock()
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range results {
				if !r.OK() {
					t.Fatalf("request %d failed: %s %s", r.Seq, r.ErrorKind, r.Error)
				}
				if len(r.Delays) != r.Events || r.Events <= r.ContentEvents {
					t.Errorf("request %d: %d delays for %d events (%d with content)", r.Seq, len(r.Delays), r.Events, r.ContentEvents)
				}
				for i, d := range r.Delays {
					// Negative would mean the stamp and the arrival are not
					// on one clock; a second, that events are not dated by
					// their own stamp.
					if d < 0 || d > time.Second {
						t.Errorf("request %d event %d: delay %v", r.Seq, i, d)
					}
				}
			}
		})
	}
}
