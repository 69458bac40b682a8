package caddymodule

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/tokentap/tokentap/internal/exchange"
	"github.com/tokentap/tokentap/internal/loadgen"
	"github.com/tokentap/tokentap/internal/simulator"
	"github.com/tokentap/tokentap/internal/stats"
)

// TestFairCompareThroughHTTP: two simulated models of the same speed,
// which both slow by 10 % of their rate alone per further request in
// flight (batch_slowdown), behind the measuring middleware on loopback,
// driven by the load generator: "light" at 10 requests/s, "heavy" at 25,
// Poisson arrivals, for 15 s. tokentap's own rows show heavy far slower;
// compared within cells of in-flight level, the two are close to equal.
// It starts no Caddy and binds no fixed port.
//
// The fair figure is held to 20 % of 1, not to its interval: within the
// shared cell (4-7 in flight) the heavy model's levels sit higher than the
// light one's, a difference the cells cannot see (docs/live-stats.md,
// "Comparing two models fairly", states the limit); the seeded tests in
// package stats check the interval where the cells' conditions match.
func TestFairCompareThroughHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("15 s of load")
	}
	curve := simulator.Profile{TimeToFirstToken: caddy.Duration(40 * time.Millisecond), TokensPerSecond: 200, BatchSlowdown: 0.1}
	sim := &simulator.Handler{
		Profile: simulator.Profile{OutputTokens: 30},
		Usage:   simulator.UsageAlways,
		Models:  map[string]simulator.Profile{"light": curve, "heavy": curve},
	}
	if err := sim.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	if err := sim.Validate(); err != nil {
		t.Fatal(err)
	}
	store := stats.NewStore(stats.Options{})
	mw := exchange.New(exchange.Config{
		Provider:        "openai",
		MaxRequestBody:  1 << 16,
		MaxResponseBody: 1 << 16,
		Rows:            stats.Recorder{Store: store},
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = mw.Serve(w, r, func(w http.ResponseWriter, r *http.Request) error { return sim.ServeHTTP(w, r, nil) })
	}))
	defer srv.Close()

	var wg sync.WaitGroup
	for _, run := range []struct {
		model string
		rate  float64
		seed  uint64
	}{{"light", 10, 1}, {"heavy", 25, 2}} {
		wg.Go(func() {
			_, err := loadgen.Run(context.Background(), loadgen.Config{
				URL:         srv.URL + "/v1",
				Models:      []string{run.model},
				Rate:        run.rate,
				Arrival:     loadgen.ArrivalPoisson,
				Seed:        run.seed,
				Concurrency: 64,
				Duration:    15 * time.Second,
				Timeout:     10 * time.Second,
			})
			if err != nil {
				t.Errorf("%s: %v", run.model, err)
			}
		})
	}
	wg.Wait()

	now := time.Now()
	light, err := stats.ParseSelector("model=light")
	if err != nil {
		t.Fatal(err)
	}
	heavy, err := stats.ParseSelector("model=heavy")
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := store.Aggregate(stats.Window5m, now).Compare(light, heavy, true, now)
	if err != nil {
		t.Fatal(err)
	}
	if cmp.A.Stratified < 100 || cmp.B.Stratified < 250 {
		t.Fatalf("stratified requests: light %d, heavy %d; the rows lack in-flight levels or input sizes", cmp.A.Stratified, cmp.B.Stratified)
	}
	for _, m := range cmp.Metrics {
		if m.Quantile != "p50" {
			continue
		}
		if m.Fair == nil || m.Naive == nil {
			t.Errorf("%s p50: fair %v, naive %v (%s)", m.Metric, m.Fair, m.Naive, m.NotComparable)
			continue
		}
		t.Logf("%s p50: fair %.3f (%.3f-%.3f) over %d cells, naive %.3f; shared %.0f %% of light, %.0f %% of heavy",
			m.Metric, m.Fair.Ratio, m.Fair.Low, m.Fair.High, m.Cells, *m.Naive, 100*m.CoverageA, 100*m.CoverageB)
		fair, naive := math.Abs(math.Log(m.Fair.Ratio)), math.Abs(math.Log(*m.Naive))
		if fair > math.Log(1.2) {
			t.Errorf("%s p50: fair ratio %.3f, want within 20 %% of 1", m.Metric, m.Fair.Ratio)
		}
		if naive < math.Log(1.25) || fair > naive/2 {
			t.Errorf("%s p50: naive ratio %.3f, fair %.3f: want the load to move the naive one by 25 %% or more, and the fair one by under half that", m.Metric, *m.Naive, m.Fair.Ratio)
		}
	}
}
