package loadgen

import (
	"context"
	"math"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/simulator"
	"github.com/tokentap/tokentap/internal/simulator/stamp"
)

// The client's figures come from wall-clock reads. Under go test -race, on a
// machine shared with other work, only what holds however late a goroutine
// runs is checked: the client sees no token before the simulator's
// schedule, each request's times are in order, and the report's figures
// are its requests'. How close the figures come to the schedule is
// TestRunTiming's, run alone without -race: the bounds below allow what a
// quiet machine adds (a scheduling delay on the first token) but not what a
// wrong measurement would give (the other model's speed, a rate off by a
// factor).
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

type runCase struct {
	name string
	cfg  Config
	want []modelWant
}

// speedRuns send two models of known speed in one run, for each API.
var speedRuns = []runCase{
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
}

// run runs tc against the simulator at base and returns the report and
// every request's result.
func (tc runCase) run(t *testing.T, base string) (*Report, []*Result) {
	t.Helper()
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
	return rep, results
}

func TestRun(t *testing.T) {
	base := startSimulator(t, simulator.Handler{})
	for _, tc := range append(slices.Clip(speedRuns), []runCase{
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
	}...) {
		t.Run(tc.name, func(t *testing.T) {
			rep, results := tc.run(t, base)
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
	// A request has a rate unless all its tokens came in one read, which
	// a stream of a few milliseconds does when the machine is busy.
	var rates []float64
	for _, r := range results {
		if r.Model == w.model && r.OK() && r.OutputTokensPerSecond() > 0 {
			rates = append(rates, r.OutputTokensPerSecond())
		}
	}
	if got.TimeToFirstToken.Count != w.succeeded || got.OutputTokensPerSecond.Count != len(rates) ||
		got.InterTokenLatency.Count != w.succeeded*int(perRequest-1) {
		t.Errorf("%s: %d TTFT, %d rate, %d gap samples; want %d, %d, %d", got.Model,
			got.TimeToFirstToken.Count, got.OutputTokensPerSecond.Count, got.InterTokenLatency.Count,
			w.succeeded, len(rates), w.succeeded*int(perRequest-1))
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
	// Order, which holds however loaded the machine: the client's clock
	// starts before the simulator's, the simulator sends no token before
	// its schedule, and the client reads each token after it was sent.
	lastDue := w.ttft + time.Duration(float64(perRequest-1)/w.rate*float64(time.Second))
	var ttfts []float64
	for _, r := range results {
		if r.Model != w.model || !r.OK() {
			continue
		}
		if !(w.ttft <= r.TimeToFirstToken() && r.TimeToFirstToken() == r.FirstToken && r.FirstToken <= r.LastToken && lastDue <= r.LastToken && r.LastToken <= r.End) {
			t.Errorf("%s request %d: time to first token %v, first token %v, last %v, end %v; want the first after %v, the last after %v, in order",
				got.Model, r.Seq, r.TimeToFirstToken(), r.FirstToken, r.LastToken, r.End, w.ttft, lastDue)
		}
		ttfts = append(ttfts, r.TimeToFirstToken().Seconds())
	}
	// The medians are the requests': the sketch errs by 0.5 % at most.
	within := func(v float64, vs []float64) bool {
		if len(vs) == 0 {
			return v == 0
		}
		return v >= slices.Min(vs)*0.99 && v <= slices.Max(vs)*1.01
	}
	if !within(got.TimeToFirstToken.P50, ttfts) || !within(got.OutputTokensPerSecond.P50, rates) {
		t.Errorf("%s: p50 time to first token %v s of %v, tokens/s %v of %v", got.Model,
			got.TimeToFirstToken.P50, ttfts, got.OutputTokensPerSecond.P50, rates)
	}
}

// checkSpeed checks how close the client's figures come to the
// simulator's schedule: for TestRunTiming, on a quiet machine.
func checkSpeed(t *testing.T, got ModelReport, w modelWant) {
	t.Helper()
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

// Each request to "slow" for 10 tokens takes 80 ms + 9 tokens at 100/s =
// 170 ms.
const perRequest = 170 * time.Millisecond

type boundsCase struct {
	name string
	cfg  Config
	// The number of requests a run starts, on any machine; at least
	// minOnTime (when set) where timers wake on time.
	minRequests, maxRequests, minOnTime int
	wantLate                            bool
	// maxElapsed bounds the run's time where timers wake on time.
	maxElapsed time.Duration
	// cancelAt cancels the run as its cancelAt-th request is sent.
	cancelAt int
}

var boundsCases = []boundsCase{
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
		// 40/s for 500 ms: requests due at 0, 25, ... 475 ms. A timer
		// that wakes late near the end leaves the last ones unstarted.
		minRequests: 1, maxRequests: 20, minOnTime: 18,
		maxElapsed: 500*time.Millisecond + perRequest + ttftSlack,
	},
	{
		name: "rate beyond the in-flight cap starts late",
		cfg:  Config{Rate: 50, Concurrency: 1, Requests: 3},
		// One at a time, at least 170 ms each, where the schedule
		// wanted one every 20 ms.
		minRequests: 3, maxRequests: 3, wantLate: true,
		maxElapsed: 3*perRequest + ttftSlack,
	},
	{
		name: "canceled run stops at once",
		// Two requests that would wait a minute for their first token.
		cfg:         Config{Concurrency: 2, Requests: 100, Header: http.Header{simulator.HeaderTimeToFirstToken: {"1m"}}},
		minRequests: 2, maxRequests: 2, cancelAt: 2,
		maxElapsed: ttftSlack, // from the cancel
	},
}

// run runs tc against the simulator at base and returns the report, every
// request's result and how long the run took (from the cancel, if any).
func (tc boundsCase) run(t *testing.T, base string) (*Report, []*Result, time.Duration) {
	t.Helper()
	cfg := tc.cfg
	cfg.URL, cfg.Models = base, []string{"slow"}
	cfg.Header = cfg.Header.Clone()
	if cfg.Header == nil {
		cfg.Header = http.Header{}
	}
	cfg.Header.Set(simulator.HeaderOutputTokens, "10")
	var mu sync.Mutex
	var results []*Result
	cfg.OnResult = func(r *Result) {
		mu.Lock()
		results = append(results, r)
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &cancelOn{n: tc.cancelAt, cancel: cancel}
	if tc.cancelAt > 0 {
		cfg.Client = &http.Client{Transport: c}
	}
	began := time.Now()
	rep, err := Run(ctx, cfg)
	took := time.Since(began)
	if err != nil {
		t.Fatal(err)
	}
	if tc.cancelAt > 0 {
		c.mu.Lock()
		at := c.at
		c.mu.Unlock()
		if at.IsZero() {
			t.Fatalf("the run sent fewer than %d requests", tc.cancelAt)
		}
		took = time.Since(at)
	}
	return rep, results, took
}

// cancelOn is a transport that cancels the run as its nth request is sent:
// the requests before it are in flight then, however slow the machine.
type cancelOn struct {
	n      int
	cancel context.CancelFunc
	mu     sync.Mutex
	sent   int
	at     time.Time
}

func (c *cancelOn) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	if c.sent++; c.sent == c.n {
		c.at = time.Now()
		c.cancel()
	}
	c.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// TestRunBounds checks what bounds a run on any machine: the counts, the
// order of starts and ends, and that a run ends long before what it bounds
// would. How soon it ends is TestRunTiming's.
func TestRunBounds(t *testing.T) {
	base := startSimulator(t, simulator.Handler{})
	// Far longer than any of these runs takes, far shorter than the
	// minute of the unbounded alternatives.
	const liveness = 20 * time.Second
	for _, tc := range boundsCases {
		t.Run(tc.name, func(t *testing.T) {
			rep, results, took := tc.run(t, base)
			n := rep.Total.Requests
			if n < tc.minRequests || n > tc.maxRequests || len(results) != n {
				t.Errorf("%d requests (%d results), want %d to %d", n, len(results), tc.minRequests, tc.maxRequests)
			}
			if took > liveness {
				t.Errorf("the run took %v", took)
			}
			// Requests start while the duration lasts: a run bounded by
			// nothing else cannot end before it.
			if tc.cfg.Requests == 0 && took < tc.cfg.Duration {
				t.Errorf("the run took %v, want at least its duration %v", took, tc.cfg.Duration)
			}
			// A timer can wake late, never early: no request starts
			// before its place in the schedule.
			if tc.cfg.Rate > 0 {
				for _, r := range results {
					if due := time.Duration(float64(r.Seq) / tc.cfg.Rate * float64(time.Second)); r.Start.Sub(rep.Started) < due {
						t.Errorf("request %d started %v into the run, before its time %v", r.Seq, r.Start.Sub(rep.Started), due)
					}
				}
			}
			// Only lateness is checked: on a busy machine a timer can wake
			// more than 10 ms late and make an on-schedule run count one.
			if tc.wantLate && rep.LateStarts == 0 {
				t.Errorf("no late starts, want some")
			}
			if tc.cancelAt > 0 && rep.Total.Errors[ErrCanceled] != n {
				t.Errorf("errors %v, want all %d canceled", rep.Total.Errors, n)
			}
			if tc.cancelAt == 0 && rep.Total.Failed != 0 {
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
				Header: http.Header{stamp.Header: {"true"}},
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
