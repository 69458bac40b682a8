package stats

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/simulator/speed"
)

// conditions is the load and the prompts one model is given: weights over
// the in-flight buckets and over the input buckets. Within a bucket the
// level is uniform and the prompt's length log-uniform, alike for every
// model, so that a cell's conditions are the same whoever served it: what
// the fair comparison assumes (docs/live-stats.md states the limit).
type conditions struct {
	load  [numInflightBuckets]float64
	input [numInputBuckets]float64
}

// pick draws a bucket by weights.
func pick(rnd *rand.Rand, weights []float64) int {
	total := 0.0
	for _, w := range weights {
		total += w
	}
	u := rnd.Float64() * total
	for i, w := range weights {
		if u < w {
			return i
		}
		u -= w
	}
	return len(weights) - 1
}

// draw returns one request's in-flight level and input tokens.
func (c *conditions) draw(rnd *rand.Rand) (level, tokens int) {
	lo, hi := InflightRange(pick(rnd, c.load[:]))
	if hi == 0 {
		hi = 2*lo - 1
	}
	level = int(lo) + rnd.IntN(int(hi-lo+1))
	tlo, thi := InputRange(pick(rnd, c.input[:]))
	if thi == 0 {
		thi = 2*tlo - 1
	}
	flo := math.Max(float64(tlo), 16)
	tokens = int(math.Exp(math.Log(flo) + rnd.Float64()*(math.Log(float64(thi+1))-math.Log(flo))))
	return level, tokens
}

// fairModel is one simulated model: its speed and what it is given, n
// requests taking each of conds in turn.
type fairModel struct {
	key   Key
	curve speed.Curve
	conds []conditions
	n     int
}

// noiseSigma is the spread of ln(value) of each request's time to first
// token and rate around the curve's: log-normal, drawn independently.
const noiseSigma = 0.25

// generate records m's n requests into s on a virtual clock: each starts
// at a random moment of the first two minutes after the origin, and ends
// its time to first token plus 200 output tokens at its rate later. It
// returns the values recorded, for exact quantiles.
func generate(s *Store, m *fairModel, rnd *rand.Rand) (ttfts, rates []float64) {
	for i := range m.n {
		level, tokens := m.conds[i%len(m.conds)].draw(rnd)
		ttft, rate := m.curve.At(level, tokens)
		first := ttft.Seconds() * math.Exp(noiseSigma*rnd.NormFloat64())
		rate *= math.Exp(noiseSigma * rnd.NormFloat64())
		start := time.Duration(rnd.Int64N(int64(2 * time.Minute)))
		end := start + time.Duration((first+200/rate)*float64(time.Second))
		var smp Sample
		smp.Set(TimeToFirstToken, first)
		smp.Set(OutputTokensPerSecond, rate)
		smp.Set(InputTokens, float64(tokens))
		smp.Inflight = int64(level)
		k := m.key
		s.Record(&k, &smp, at(end))
		ttfts, rates = append(ttfts, first), append(rates, rate)
	}
	return ttfts, rates
}

// exactQuantile is the value at rank q*(n-1) of vs, as the sketches rank.
func exactQuantile(vs []float64, q float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

var (
	// curveA is a mid-sized hosted model that slows by 8 % of its rate
	// alone per further request in flight.
	curveA = speed.Curve{TimeToFirstToken: 250 * time.Millisecond, TokensPerSecond: 60, BatchSlowdown: 0.08, PrefillTokensPerSecond: 5000}
	// light is few requests in flight and short prompts; heavy is many
	// and long ones. They share the in-flight buckets 2-3 and 4-7 and the
	// input buckets 512-1023 and 1k-2k.
	light = conditions{
		load:  [numInflightBuckets]float64{0.5, 0.3, 0.2},
		input: [numInputBuckets]float64{0.5, 0.3, 0.2},
	}
	heavy = conditions{
		load:  [numInflightBuckets]float64{0, 0.2, 0.3, 0.5},
		input: [numInputBuckets]float64{0, 0.2, 0.3, 0.5},
	}
)

// faster is c made f times faster: its rate times f, its time to first
// token (fixed part and prefill) over f.
func faster(c speed.Curve, f float64) speed.Curve {
	c.TokensPerSecond *= f
	c.PrefillTokensPerSecond *= f
	c.TimeToFirstToken = time.Duration(float64(c.TimeToFirstToken) / f)
	return c
}

// fairRun records A's and B's traffic of one seed and compares B with A
// at three minutes, in the 5m window (whose strata then hold all of it); it returns the comparison and the
// exact naive ratios (B's quantile over A's over the raw values) by
// metric and quantile name.
func fairRun(t *testing.T, a, b fairModel, seed uint64) (*Comparison, map[string]float64) {
	t.Helper()
	s := newTestStore(0)
	rnd := rand.New(rand.NewPCG(seed, 0x66616972))
	ta, ra := generate(s, &a, rnd)
	tb, rb := generate(s, &b, rnd)
	naive := map[string]float64{}
	for _, q := range compareQuantiles {
		naive[TimeToFirstToken.String()+QuantileName(q)] = exactQuantile(tb, q) / exactQuantile(ta, q)
		naive[OutputTokensPerSecond.String()+QuantileName(q)] = exactQuantile(rb, q) / exactQuantile(ra, q)
	}
	now := at(3 * time.Minute)
	cmp, err := s.Aggregate(Window5m, now).Compare(mustSelector(t, "model="+a.key.Model), mustSelector(t, "model="+b.key.Model), true, now)
	if err != nil {
		t.Fatal(err)
	}
	return cmp, naive
}

func mustSelector(t *testing.T, s string) Selector {
	t.Helper()
	sel, err := ParseSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// fairSeeds is how many seeded runs the coverage tests make.
const fairSeeds = 200

// fairCoverage runs fairSeeds seeds and returns, per metric and quantile,
// how many runs' fair interval held want(metric), and the least and most
// naive ratio seen, checking each run's naive ratio against the exact one.
func fairCoverage(t *testing.T, a, b fairModel, want func(Metric) float64) (held map[string]int, naiveMin, naiveMax map[string]float64) {
	held, naiveMin, naiveMax = map[string]int{}, map[string]float64{}, map[string]float64{}
	for seed := range uint64(fairSeeds) {
		cmp, exact := fairRun(t, a, b, seed)
		for _, cm := range cmp.Metrics {
			name := cm.Metric + cm.Quantile
			if cm.Fair == nil {
				t.Fatalf("seed %d, %s %s: not comparable: %s", seed, cm.Metric, cm.Quantile, cm.NotComparable)
			}
			m, _ := LookupMetric(cm.Metric)
			if w := want(m); cm.Fair.Low <= w && w <= cm.Fair.High {
				held[name]++
			}
			// The naive ratio is the rows' sketches': within their 1 %
			// of each side's exact quantile.
			if cm.Naive == nil || math.Abs(*cm.Naive/exact[name]-1) > 0.0202 {
				t.Fatalf("seed %d, %s %s: naive %v, exact %.4g", seed, cm.Metric, cm.Quantile, cm.Naive, exact[name])
			}
			if _, ok := naiveMin[name]; !ok || *cm.Naive < naiveMin[name] {
				naiveMin[name] = *cm.Naive
			}
			naiveMax[name] = math.Max(naiveMax[name], *cm.Naive)
		}
	}
	return held, naiveMin, naiveMax
}

// minCoverage is the least share of seeded runs whose fair interval holds
// the true ratio, at every metric and quantile, as measured (the 95 % the
// interval claims, and more: the sketches' accuracy widens it);
// docs/live-stats.md states it.
const minCoverage = 0.975

// TestFairCompareEqualSpeed: two models of the same speed, B given the
// heavy load and the long prompts. Side by side B looks over twice as slow
// to its first token and a fifth or more slower to decode; within cells
// its interval holds 1 in at least minCoverage of the seeded runs.
func TestFairCompareEqualSpeed(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("200 seeded runs; run without -short and -race")
	}
	a := fairModel{key("openai", "model-a"), curveA, []conditions{light}, 3000}
	b := fairModel{key("openai", "model-b"), curveA, []conditions{heavy}, 3000}
	held, naiveMin, naiveMax := fairCoverage(t, a, b, func(Metric) float64 { return 1 })
	// How far the conditions move the naive ratios, in every run: B's
	// extra load and prefill slow it by these factors at least.
	naiveBounds := map[string][2]float64{
		"time_to_first_tokenp50":      {2.2, math.Inf(1)},
		"time_to_first_tokenp95":      {2.3, math.Inf(1)},
		"output_tokens_per_secondp50": {0, 0.8},
		"output_tokens_per_secondp95": {0, 0.9},
	}
	for name, n := range held {
		cov := float64(n) / fairSeeds
		t.Logf("%s: fair interval held 1 in %d of %d runs (%.1f %%); naive %.3g to %.3g", name, n, fairSeeds, 100*cov, naiveMin[name], naiveMax[name])
		if cov < minCoverage {
			t.Errorf("%s: fair interval held 1 in %.1f %% of runs, want at least %.0f %%", name, 100*cov, 100*minCoverage)
		}
		if bnd := naiveBounds[name]; naiveMin[name] < bnd[0] || naiveMax[name] > bnd[1] {
			t.Errorf("%s: naive ratio %.3g to %.3g, want within [%g, %g]: the conditions should move it", name, naiveMin[name], naiveMax[name], bnd[0], bnd[1])
		}
	}
	if len(held) != 4 {
		t.Errorf("%d metric quantiles compared, want 4", len(held))
	}
}

// TestFairCompareFaster: B truly 1.5 times faster (its rate 1.5 times A's,
// its time to first token two thirds), given the heavy load and long
// prompts: side by side it looks slower, yet its fair interval holds 1.5
// (tokens/s) and 1/1.5 (time to first token) in at least minCoverage of
// the seeded runs.
func TestFairCompareFaster(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("200 seeded runs; run without -short and -race")
	}
	a := fairModel{key("openai", "model-a"), curveA, []conditions{light}, 3000}
	b := fairModel{key("openai", "model-b"), faster(curveA, 1.5), []conditions{heavy}, 3000}
	held, naiveMin, naiveMax := fairCoverage(t, a, b, func(m Metric) float64 {
		if m == TimeToFirstToken {
			return 1 / 1.5
		}
		return 1.5
	})
	for name, n := range held {
		cov := float64(n) / fairSeeds
		t.Logf("%s: fair interval held the truth in %d of %d runs (%.1f %%); naive %.3g to %.3g", name, n, fairSeeds, 100*cov, naiveMin[name], naiveMax[name])
		if cov < minCoverage {
			t.Errorf("%s: fair interval held the truth in %.1f %% of runs, want at least %.0f %%", name, 100*cov, 100*minCoverage)
		}
	}
	// Side by side, the faster model does not look 1.5 times faster.
	if n := naiveMax["output_tokens_per_secondp50"]; n > 1.2 {
		t.Errorf("naive tokens/s p50 ratio up to %.3g: the load should hide most of B's speed", n)
	}
	if len(held) != 4 {
		t.Errorf("%d metric quantiles compared, want 4", len(held))
	}
}

// TestFairCompareNotComparable: where the two share no conditions, or too
// few requests, the comparison says why instead of giving a number.
func TestFairCompareNotComparable(t *testing.T) {
	only := func(ib, nb int) conditions {
		var c conditions
		c.load[ib], c.input[nb] = 1, 1
		return c
	}
	tests := []struct {
		name   string
		a, b   []conditions
		na, nb int
		want   string
	}{
		{"no overlap in load", []conditions{only(0, 1)}, []conditions{only(3, 1)}, 500, 500, "no overlap in load"},
		{"no overlap in input size", []conditions{only(2, 0)}, []conditions{only(2, 4)}, 500, 500, "no overlap in input size"},
		// Both see levels 1 and 2-3 and inputs below 512 and 512-1023,
		// but never the same pair.
		{"no shared cell", []conditions{only(0, 0), only(1, 1)}, []conditions{only(0, 1), only(1, 0)}, 500, 500, "no cell of in-flight level and input size has requests of both"},
		{"too few requests", []conditions{only(1, 1)}, []conditions{only(1, 1)}, 3, 500, "too few requests (A: 3, B: 500; a cell needs 20 of each)"},
		{"too few in the shared cell", []conditions{only(1, 1), only(2, 2)}, []conditions{only(2, 2), only(3, 3)}, 30, 500, "too few requests in shared cells (A: 15, B: 250; a cell needs 20 of each)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fairModel{key("p", "a"), curveA, tt.a, tt.na}
			b := fairModel{key("p", "b"), curveA, tt.b, tt.nb}
			cmp, _ := fairRun(t, a, b, 1)
			for _, cm := range cmp.Metrics {
				if cm.Quantile != "p50" {
					continue
				}
				if cm.Fair != nil || cm.NotComparable != tt.want {
					t.Errorf("%s: fair %v, not comparable %q; want %q", cm.Metric, cm.Fair, cm.NotComparable, tt.want)
				}
				if cm.Naive == nil {
					t.Errorf("%s: no naive ratio beside the reason", cm.Metric)
				}
			}
		})
	}
}

// TestMinRequests: the fewest requests a cell needs is the floor for the
// median and, for p95, the least n whose rank interval stays within the
// cell's requests.
func TestMinRequests(t *testing.T) {
	tests := []struct {
		q    float64
		want int64
	}{{0.5, minCellRequests}, {0.95, 110}}
	for _, tt := range tests {
		t.Run(QuantileName(tt.q), func(t *testing.T) {
			got := MinRequests(tt.q)
			if got != tt.want {
				t.Errorf("MinRequests(%g) = %d, want %d", tt.q, got, tt.want)
			}
			if _, hi := rankInterval(got-1, tt.q); tt.q > 0.5 && hi <= got-2 {
				t.Errorf("n = %d would do already", got-1)
			}
		})
	}
}

// TestParseSelector: the selector syntax and its errors.
func TestParseSelector(t *testing.T) {
	tests := []struct {
		in              string
		provider, model string
		labels          []Label
		err             string
	}{
		{in: "gpt-4o", model: "gpt-4o"},
		{in: "model=gpt-4o", model: "gpt-4o"},
		{in: "provider=openai,model=x", provider: "openai", model: "x"},
		{in: "label:route=/v1/chat", labels: []Label{{"route", "/v1/chat"}}},
		{in: "provider=openai, label:team=a, label:app=b", provider: "openai", labels: []Label{{"team", "a"}, {"app", "b"}}},
		{in: "", err: "empty selector"},
		{in: "model=", err: "has no value"},
		{in: "model=a,model=b", err: "given twice"},
		{in: "team=a", err: "unknown term"},
		{in: "label:=a", err: "unknown term"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			sel, err := ParseSelector(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sel.provider != tt.provider || sel.model != tt.model || !reflect.DeepEqual(sel.labels, tt.labels) || sel.String() != tt.in {
				t.Errorf("got %+v", sel)
			}
		})
	}
}

// TestCompareSelectsRows: a selector gathers every row it matches, never
// the overflow row; a side without rows, a row on both sides and a window
// without strata are errors.
func TestCompareSelectsRows(t *testing.T) {
	s := newTestStore(3)
	smp := full(1)
	smp.Inflight = 1
	for _, k := range []Key{
		key("openai", "gpt", "route", "/chat"),
		key("openai", "gpt", "route", "/responses"),
		key("anthropic", "claude", "route", "/chat"),
		key("other", "spills-over"),
	} {
		record(s, k, smp, time.Second)
	}
	now := at(time.Minute)
	agg := s.Aggregate(Window5m, now)
	tests := []struct {
		name, a, b string
		rowsA      int
		err        string
	}{
		{"by model", "model=gpt", "model=claude", 2, ""},
		{"by label", "label:route=/responses", "provider=anthropic", 1, ""},
		{"both sides", "model=gpt", "provider=openai", 0, "in both"},
		{"no rows", "model=none", "model=claude", 0, "no row"},
		{"overflow never matches", "model=" + OverflowValue, "model=claude", 0, "no row"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmp, err := agg.Compare(mustSelector(t, tt.a), mustSelector(t, tt.b), false, now)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cmp.A.Rows) != tt.rowsA || cmp.A.Stratified != int64(tt.rowsA) {
				t.Errorf("A has %d rows, %d stratified requests; want %d", len(cmp.A.Rows), cmp.A.Stratified, tt.rowsA)
			}
		})
	}
	for _, w := range []Window{Window1m, Window24h} {
		if _, err := s.Aggregate(w, now).Compare(mustSelector(t, "gpt"), mustSelector(t, "claude"), false, now); err == nil || !strings.Contains(err.Error(), "keeps no strata") {
			t.Errorf("window %s: error %v, want keeps no strata", w, err)
		}
	}
}

// TestCompareMergesExactly: the comparison of instances' snapshots merged
// is the comparison of one instance that saw all the traffic; a snapshot
// without strata (an older tokentap's) still reads, and compares as having
// no stratified requests.
func TestCompareMergesExactly(t *testing.T) {
	a := fairModel{key("openai", "model-a"), curveA, []conditions{light}, 2000}
	b := fairModel{key("openai", "model-b"), faster(curveA, 1.5), []conditions{heavy}, 2000}
	union := newTestStore(0)
	parts := []*Store{newTestStore(0), newTestStore(0)}
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, m := range []*fairModel{&a, &b} {
		for i := range m.n {
			one := *m
			one.n = 1
			seed := rnd.Uint64()
			generate(union, &one, rand.New(rand.NewPCG(seed, 0)))
			generate(parts[i%2], &one, rand.New(rand.NewPCG(seed, 0)))
		}
	}
	now := at(3 * time.Minute)
	sa, sb := mustSelector(t, "model-a"), mustSelector(t, "model-b")
	for _, w := range []Window{Window5m, Window1h} {
		merged := viaSnapshot(t, parts[0].Aggregate(w, now))
		if err := merged.Merge(viaSnapshot(t, parts[1].Aggregate(w, now))); err != nil {
			t.Fatal(err)
		}
		got, err := merged.Compare(sa, sb, true, now)
		if err != nil {
			t.Fatal(err)
		}
		want, err := union.Aggregate(w, now).Compare(sa, sb, true, now)
		if err != nil {
			t.Fatal(err)
		}
		if want.Metrics[0].Fair == nil || len(want.Cells) < 4 {
			t.Fatalf("%s: the union compares nothing: the case tests nothing", w)
		}
		if !reflect.DeepEqual(got, want) {
			gj, _ := json.MarshalIndent(got, "", " ")
			wj, _ := json.MarshalIndent(want, "", " ")
			t.Errorf("%s: merged comparison differs from the union's\nmerged: %s\nunion: %s", w, gj, wj)
		}
	}

	// An older snapshot: no strata field at all.
	snap, err := union.Aggregate(Window5m, now).Snapshot(now)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range doc["rows"].([]any) {
		if _, ok := r.(map[string]any)["strata"]; !ok {
			t.Fatal("a row without strata: the case tests nothing")
		}
		delete(r.(map[string]any), "strata")
	}
	raw, _ = json.Marshal(doc)
	old, err := ParseSnapshot(raw)
	if err != nil {
		t.Fatal(err)
	}
	agg, err := old.Aggregate()
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := agg.Compare(sa, sb, false, now)
	if err != nil {
		t.Fatal(err)
	}
	if cmp.A.Stratified != 0 || cmp.Metrics[0].Fair != nil || !strings.HasPrefix(cmp.Metrics[0].NotComparable, "too few requests (A: 0, B: 0") {
		t.Errorf("older snapshot: stratified %d, fair %v, %q", cmp.A.Stratified, cmp.Metrics[0].Fair, cmp.Metrics[0].NotComparable)
	}
}
