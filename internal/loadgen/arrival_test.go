package loadgen

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/tokentap/tokentap/internal/simulator"
)

// ksStatistic is the one-sample Kolmogorov-Smirnov statistic of xs
// against cdf: the largest distance between the empirical and the given
// distribution functions.
func ksStatistic(xs []float64, cdf func(float64) float64) float64 {
	xs = slices.Clone(xs)
	sort.Float64s(xs)
	n := float64(len(xs))
	d := 0.0
	for i, x := range xs {
		f := cdf(x)
		d = max(d, math.Abs(float64(i+1)/n-f), math.Abs(f-float64(i)/n))
	}
	return d
}

// ksCritical is the statistic's critical value at the 1 % level for n
// samples (the asymptotic 1.628/sqrt(n), close enough from n = 100).
func ksCritical(n int) float64 { return 1.628 / math.Sqrt(float64(n)) }

// gaps returns the first n gaps, in seconds, of cfg's schedule.
func gaps(t *testing.T, cfg Config, n int) []float64 {
	t.Helper()
	if err := cfg.validateArrival(); err != nil {
		t.Fatal(err)
	}
	s := newSchedule(&cfg)
	prev := s.next()
	out := make([]float64, n)
	for i := range out {
		at := s.next()
		out[i] = (at - prev).Seconds()
		prev = at
	}
	return out
}

// TestScheduleArrivals: constant arrivals are evenly spaced; Poisson ones
// pass a Kolmogorov-Smirnov test against the exponential distribution of
// the rate, and burstier ones against their gamma; the same seed gives the
// same schedule.
func TestScheduleArrivals(t *testing.T) {
	const rate, n = 20.0, 4000
	tests := []struct {
		name string
		cfg  Config
		cdf  func(float64) float64
		cv   float64 // the gaps' coefficient of variation
	}{
		{"poisson", Config{Rate: rate, Arrival: ArrivalPoisson, Seed: 1}, distuv.Exponential{Rate: rate}.CDF, 1},
		{"poisson, another seed", Config{Rate: rate, Arrival: ArrivalPoisson, Seed: 2}, distuv.Exponential{Rate: rate}.CDF, 1},
		{"bursty (0.5)", Config{Rate: rate, Arrival: ArrivalPoisson, Burstiness: 0.5, Seed: 3}, distuv.Gamma{Alpha: 0.5, Beta: 0.5 * rate}.CDF, math.Sqrt(2)},
		{"even (4)", Config{Rate: rate, Arrival: ArrivalPoisson, Burstiness: 4, Seed: 4}, distuv.Gamma{Alpha: 4, Beta: 4 * rate}.CDF, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gaps(t, tt.cfg, n)
			d := ksStatistic(g, tt.cdf)
			t.Logf("KS statistic %.4f (critical at 1 %%: %.4f)", d, ksCritical(n))
			if d > ksCritical(n) {
				t.Errorf("KS statistic %.4f over the 1 %% critical value %.4f: the gaps are not the distribution asked for", d, ksCritical(n))
			}
			mean, sd := meanSD(g)
			if math.Abs(mean*rate-1) > 0.05 || math.Abs(sd/mean-tt.cv) > 0.1*tt.cv {
				t.Errorf("gaps mean %.4f s (want %.4f), coefficient of variation %.3f (want %.3f)", mean, 1/rate, sd/mean, tt.cv)
			}
			if again := gaps(t, tt.cfg, n); !slices.Equal(again, g) {
				t.Error("the same seed gave another schedule")
			}
		})
	}
	t.Run("constant", func(t *testing.T) {
		for i, g := range gaps(t, Config{Rate: rate}, 100) {
			if math.Abs(g-1/rate) > 1e-9 {
				t.Fatalf("gap %d: %v s, want %v", i, g, 1/rate)
			}
		}
	})
	t.Run("a uniform draw fails the test", func(t *testing.T) {
		// The statistic can fail: gaps uniform on [0, 2/rate] have the
		// right mean and are not exponential.
		rnd := rand.New(rand.NewPCG(5, 5))
		g := make([]float64, n)
		for i := range g {
			g[i] = 2 / rate * rnd.Float64()
		}
		if d := ksStatistic(g, distuv.Exponential{Rate: rate}.CDF); d <= ksCritical(n) {
			t.Errorf("KS statistic %.4f: uniform gaps passed as exponential", d)
		}
	})
}

func meanSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(xs)-1))
}

// TestArrivalConfig: the arrival settings are checked.
func TestArrivalConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"unknown arrival", Config{Rate: 1, Arrival: "bursty"}, `arrival must be "constant" or "poisson"`},
		{"poisson without a rate", Config{Arrival: ArrivalPoisson}, "poisson arrivals need a rate"},
		{"negative burstiness", Config{Rate: 1, Arrival: ArrivalPoisson, Burstiness: -1}, "burstiness must be a positive number"},
		{"burstiness without poisson", Config{Rate: 1, Burstiness: 2}, "burstiness shapes poisson arrivals only"},
		{"negative warmup", Config{Warmup: -1}, "warmup must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.validateArrival(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestPoissonRunAndWarmup: a Poisson run against the simulator starts
// each request when its schedule says (the median within 5 ms, a busy
// machine's timer wake-ups aside), the schedule being
// TestScheduleArrivals's Poisson process; its warm-up requests are sent,
// marked and left out of the report.
func TestPoissonRunAndWarmup(t *testing.T) {
	base := startSimulator(t, simulator.Handler{})
	const rate, warmup, requests = 50.0, 5, 200
	cfg := Config{URL: base + "/v1", Models: []string{"fast"}, Rate: rate, Arrival: ArrivalPoisson, Seed: 7,
		Warmup: warmup, Requests: requests, MaxTokens: 2}
	var mu sync.Mutex
	starts := map[int]time.Time{}
	var warm int
	cfg.OnResult = func(r *Result) {
		mu.Lock()
		defer mu.Unlock()
		starts[r.Seq] = r.Start
		if r.Warmup != (r.Seq < warmup) {
			t.Errorf("request %d: warmup %v", r.Seq, r.Warmup)
		}
		if r.Warmup {
			warm++
		}
	}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.Requests != requests || warm != warmup || len(starts) != warmup+requests {
		t.Fatalf("report %d requests, %d warm-up of %d sent; want %d, %d of %d", rep.Total.Requests, warm, len(starts), requests, warmup, warmup+requests)
	}
	if err := cfg.validateArrival(); err != nil {
		t.Fatal(err)
	}
	sched := newSchedule(&cfg)
	// Each start against its due time; the run's own start is not known
	// here, so lateness is measured from the earliest start's, and a late
	// first request moves nothing.
	offsets := make([]time.Duration, len(starts))
	origin := time.Duration(math.MaxInt64)
	for seq := range offsets {
		offsets[seq] = starts[seq].Sub(starts[0]) - sched.next()
		origin = min(origin, offsets[seq])
	}
	late := make([]float64, len(offsets))
	for i, o := range offsets {
		late[i] = (o - origin).Seconds()
	}
	sort.Float64s(late)
	median, p95 := late[len(late)/2], late[len(late)*95/100]
	t.Logf("lateness against the schedule: median %.2f ms, p95 %.2f ms", median*1e3, p95*1e3)
	if median > 0.005 {
		t.Errorf("median lateness %.2f ms: the run does not follow its Poisson schedule", median*1e3)
	}
}

// TestSweep: a sweep runs each level in turn, each a whole run with the
// level in its report; levels are parsed and checked.
func TestSweep(t *testing.T) {
	base := startSimulator(t, simulator.Handler{})
	sw, err := ParseSweep("concurrency=1,3")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := RunSweep(context.Background(), Config{URL: base + "/v1", Models: []string{"fast"}, Requests: 6, Warmup: 1, MaxTokens: 2}, sw)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sweep != "concurrency" || len(rep.Levels) != 2 || rep.Levels[0].Concurrency != 1 || rep.Levels[1].Concurrency != 3 ||
		rep.Levels[0].Total.Requests != 6 || rep.Levels[1].Total.Requests != 6 || rep.Levels[1].Warmup != 1 {
		t.Errorf("sweep report %+v", rep)
	}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "concurrency 1, after 1 warm-up requests") || !strings.Contains(b.String(), "concurrency 3, after 1 warm-up requests") {
		t.Errorf("sweep table does not head each level:\n%s", b.String())
	}

	for _, bad := range []struct{ in, want string }{
		{"threads=1,2", "want concurrency=1,2,4,8 or rate"},
		{"concurrency=1,x", `level "x" is not a positive number`},
		{"concurrency=1.5", "not a whole number of clients"},
		{"rate=0", `level "0" is not a positive number`},
	} {
		if _, err := ParseSweep(bad.in); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseSweep(%q): %v, want %q", bad.in, err, bad.want)
		}
	}
	if sw, err := ParseSweep("rate=0.5,2"); err != nil || sw.Param != "rate" || !slices.Equal(sw.Levels, []float64{0.5, 2}) {
		t.Errorf("ParseSweep(rate=0.5,2) = %+v, %v", sw, err)
	}
}
