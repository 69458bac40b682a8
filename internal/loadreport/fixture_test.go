package loadreport

import (
	"math"
	"time"

	"github.com/tokentap/tokentap/internal/loadgen"
)

// speed is a simulated model: its median time to first token (seconds)
// and tokens/s, which load slows.
type speed struct {
	model string
	ttft  float64
	tps   float64
}

// fakeReport is a report of fixed, plausible figures: each model at its
// speed, slowed by load, with a distribution spread around the median and
// a timeline of 20 half-second intervals in which TTFT creeps up.
func fakeReport(started time.Time, concurrency int, speeds ...speed) *loadgen.Report {
	rep := &loadgen.Report{
		API: loadgen.OpenAI, URL: "http://127.0.0.1:9360/v1/chat/completions",
		Concurrency: concurrency, Started: started, Elapsed: 10,
	}
	slow := 1 + 0.15*math.Log2(float64(concurrency))
	for _, s := range speeds {
		ttft, tps := s.ttft*slow, s.tps/slow
		m := loadgen.ModelReport{
			Model: s.model, Requests: 40, Succeeded: 39, Failed: 1, Errors: map[string]int{"http_429": 1},
			OutputTokens: 39 * 100, Throughput: 390,
			TimeToFirstToken:      quantiles(39, ttft, 0.3),
			OutputTokensPerSecond: quantiles(39, tps, 0.1),
			Distribution:          &loadgen.Distribution{TimeToFirstToken: cdf(ttft, 0.3), OutputTokensPerSecond: cdf(tps, 0.1)},
			Timeline:              &loadgen.Timeline{IntervalSeconds: 0.5},
		}
		for i := range 20 {
			iv := loadgen.Interval{StartSeconds: 0.5 * float64(i), EndSeconds: 0.5 * float64(i+1), Requests: 2, OutputTokens: 200}
			if i == 7 {
				iv.Failed = 1 // one failed request, and an interval without a completed one
				iv.Requests = 1
				iv.OutputTokens = 0
			} else {
				creep := 1 + 0.02*float64(i)
				iv.TimeToFirstToken = quantiles(2, ttft*creep, 0.3)
				iv.OutputTokensPerSecond = quantiles(2, tps/creep, 0.1)
			}
			m.Timeline.Intervals = append(m.Timeline.Intervals, iv)
		}
		rep.Models = append(rep.Models, m)
		rep.Total.Requests += m.Requests
		rep.Total.Succeeded += m.Succeeded
		rep.Total.Failed += m.Failed
	}
	return rep
}

// spread is the value at probability p of a distribution of median med
// and relative spread k: a log-logistic, whose quantiles have a closed
// form.
func spread(med, k, p float64) float64 {
	p = math.Min(math.Max(p, 0.001), 0.999)
	return med * math.Pow(p/(1-p), k)
}

func quantiles(n int, med, k float64) loadgen.Quantiles {
	return loadgen.Quantiles{Count: n, Mean: med, P50: med, P95: spread(med, k, 0.95), P99: spread(med, k, 0.99)}
}

func cdf(med, k float64) []loadgen.CDFPoint {
	var out []loadgen.CDFPoint
	for _, p := range loadgen.CDFProbabilities {
		out = append(out, loadgen.CDFPoint{P: p, Value: spread(med, k, p)})
	}
	return out
}

var (
	fast = speed{model: "fast", ttft: 0.1, tps: 120}
	slow = speed{model: "slow", ttft: 0.6, tps: 40}
	t0   = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
)

// fakeSweep is a concurrency sweep of fakeReports, each level 10 s after
// the last.
func fakeSweep(levels []int, speeds ...speed) *loadgen.SweepReport {
	s := &loadgen.SweepReport{Sweep: "concurrency"}
	for i, c := range levels {
		s.Levels = append(s.Levels, fakeReport(t0.Add(time.Duration(i)*11*time.Second), c, speeds...))
	}
	return s
}
