package web_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/simulator/speed"
	"github.com/tokentap/tokentap/internal/stats"
)

var update = flag.Bool("update", false, "rewrite testdata/compare*.json from the stats package")

// The comparisons the page tests serve are made by the stats package itself
// from seeded traffic on a virtual clock, so that they hold what a real
// answer holds (cells, weights, reasons) and follow the package when it
// changes: TestCompareFixtures fails until `go test ./internal/web/ -run
// TestCompareFixtures -update` rewrites them.

// compareAt is when the fixtures are compared, the stats fixture's
// generated_at.
var compareAt = time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)

// fixtureSide is one side's traffic: n requests of a model of the given
// speed, each at an in-flight level drawn uniformly from levels and with a
// prompt log-uniform in [inputLo, inputHi] tokens.
type fixtureSide struct {
	key              stats.Key
	curve            speed.Curve
	n                int
	levels           [2]int
	inputLo, inputHi float64
}

// compareFixture is one fixture file: B compared with A in the 5m window,
// with its cells.
type compareFixture struct {
	file string
	a, b fixtureSide
	seed uint64
}

// The keys match rows of testdata/stats.json, so that the page offers them
// and builds the same selectors.
var (
	keyGPT4o   = stats.Key{Provider: "openai", Model: "gpt-4o", Labels: []stats.Label{{Name: "app", Value: "<b>bold</b>"}, {Name: "team", Value: "chat"}}}
	keyHaiku   = stats.Key{Provider: "anthropic", Model: "claude-haiku-4-5", Labels: []stats.Label{{Name: "team", Value: "search"}}}
	keyGPTMini = stats.Key{Provider: "openai", Model: "gpt-4o-mini", Labels: []stats.Label{{Name: "team", Value: "search"}}}
)

var compareFixtures = []compareFixture{
	{
		// gpt-4o serves the busy hours' long prompts, claude-haiku the
		// quiet hours' short ones; they meet at 2-7 in flight and 512-3000
		// input tokens. Side by side, haiku looks faster than it is.
		file: "testdata/compare.json",
		a: fixtureSide{key: keyGPT4o, n: 2400, levels: [2]int{2, 15}, inputLo: 512, inputHi: 8000,
			curve: speed.Curve{TimeToFirstToken: 400 * time.Millisecond, TokensPerSecond: 70, BatchSlowdown: 0.06, PrefillTokensPerSecond: 4000}},
		b: fixtureSide{key: keyHaiku, n: 2400, levels: [2]int{1, 7}, inputLo: 64, inputHi: 3000,
			curve: speed.Curve{TimeToFirstToken: 300 * time.Millisecond, TokensPerSecond: 90, BatchSlowdown: 0.06, PrefillTokensPerSecond: 5000}},
		seed: 1,
	},
	{
		// One model only ever alone, the other only in a crowd: nothing
		// to compare.
		file: "testdata/compare-apart.json",
		a: fixtureSide{key: keyGPTMini, n: 300, levels: [2]int{1, 1}, inputLo: 64, inputHi: 2000,
			curve: speed.Curve{TimeToFirstToken: 250 * time.Millisecond, TokensPerSecond: 95, BatchSlowdown: 0.05, PrefillTokensPerSecond: 6000}},
		b: fixtureSide{key: keyHaiku, n: 300, levels: [2]int{8, 15}, inputLo: 64, inputHi: 2000,
			curve: speed.Curve{TimeToFirstToken: 300 * time.Millisecond, TokensPerSecond: 90, BatchSlowdown: 0.06, PrefillTokensPerSecond: 5000}},
		seed: 2,
	},
}

// selector is the selector text the page builds for a row of key k.
func selector(k stats.Key) string {
	s := "provider=" + k.Provider + ",model=" + k.Model
	for _, l := range k.Labels {
		s += ",label:" + l.Name + "=" + l.Value
	}
	return s
}

// record adds side's requests to s, ending in the two minutes before
// compareAt, each value log-normal around the curve's with a spread of
// 0.25 in logs.
func (side *fixtureSide) record(s *stats.Store, rnd *rand.Rand) {
	// Box-Muller from the generator's own floats, which its algorithm
	// fixes, so that the fixtures do not change with the library's
	// normal sampler.
	normal := func() float64 {
		return math.Sqrt(-2*math.Log(1-rnd.Float64())) * math.Cos(2*math.Pi*rnd.Float64())
	}
	for range side.n {
		level := side.levels[0] + int(rnd.Uint64()%uint64(side.levels[1]-side.levels[0]+1))
		tokens := int(math.Exp(math.Log(side.inputLo) + rnd.Float64()*(math.Log(side.inputHi)-math.Log(side.inputLo))))
		ttft, rate := side.curve.At(level, tokens)
		var smp stats.Sample
		smp.Set(stats.TimeToFirstToken, ttft.Seconds()*math.Exp(0.25*normal()))
		smp.Set(stats.OutputTokensPerSecond, rate*math.Exp(0.25*normal()))
		smp.Set(stats.InputTokens, float64(tokens))
		smp.Inflight = int64(level)
		k := side.key
		k.Labels = append([]stats.Label(nil), side.key.Labels...)
		s.Record(&k, &smp, compareAt.Add(-time.Duration(rnd.Float64()*float64(2*time.Minute))))
	}
}

// build compares the fixture's traffic as GET /tokentap/stats/compare
// with cells=true answers it, and returns the JSON.
func (f *compareFixture) build(t *testing.T) []byte {
	t.Helper()
	s := stats.NewStore(stats.Options{Origin: compareAt.Truncate(24 * time.Hour)})
	rnd := rand.New(rand.NewPCG(f.seed, 0x70616765))
	f.a.record(s, rnd)
	f.b.record(s, rnd)
	sa, err := stats.ParseSelector(selector(f.a.key))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := stats.ParseSelector(selector(f.b.key))
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := s.Aggregate(stats.Window5m, compareAt).Compare(sa, sb, true, compareAt)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(cmp, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestCompareFixtures checks that each comparison fixture is what the
// stats package answers for its traffic (and rewrites it with -update).
func TestCompareFixtures(t *testing.T) {
	for _, f := range compareFixtures {
		t.Run(f.file, func(t *testing.T) {
			got := f.build(t)
			if *update {
				if err := os.WriteFile(f.file, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(f.file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s is not what the stats package answers now; rewrite it with go test ./internal/web/ -run TestCompareFixtures -update", f.file)
			}
		})
	}
}

// TestCompareContract holds the comparison fixtures, and so the page's
// contract types, to the API's own type: each decodes into
// stats.Comparison and into compareDoc with no field either lacks, and
// both re-encode to the same JSON.
func TestCompareContract(t *testing.T) {
	for _, f := range compareFixtures {
		t.Run(f.file, func(t *testing.T) {
			raw, err := os.ReadFile(f.file)
			if err != nil {
				t.Fatal(err)
			}
			var real stats.Comparison
			var doc compareDoc
			for _, into := range []any{&real, &doc} {
				dec := json.NewDecoder(bytes.NewReader(raw))
				dec.DisallowUnknownFields()
				if err := dec.Decode(into); err != nil {
					t.Fatalf("decoding into %T: %v", into, err)
				}
			}
			if real.Version != stats.CompareVersion {
				t.Errorf("version %d, want %d", real.Version, stats.CompareVersion)
			}
			a, _ := json.Marshal(real)
			b, _ := json.Marshal(doc)
			if !bytes.Equal(a, b) {
				t.Errorf("stats.Comparison and compareDoc encode the fixture differently:\n%s\n%s", a, b)
			}
		})
	}
}
