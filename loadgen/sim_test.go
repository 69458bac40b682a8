package loadgen

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tokentap/tokentap/simulator"
)

// simAddr is the loopback address this package's tests serve the simulator
// on, inside the port range reserved for the load tests (9360-9364); the
// tests that use it run one after another, never in parallel.
const simAddr = "127.0.0.1:9360"

// Simulated models of known speed: what the client must measure.
const (
	fastTTFT = 20 * time.Millisecond
	fastRate = 400.0
	slowTTFT = 80 * time.Millisecond
	slowRate = 100.0
	tokens   = 20
)

// startSimulator serves h (with fast and slow models added) on simAddr and
// returns its base URL.
func startSimulator(t *testing.T, h simulator.Handler) string {
	t.Helper()
	if h.OutputTokens == 0 {
		h.OutputTokens = tokens
	}
	if h.Models == nil {
		h.Models = map[string]simulator.Profile{
			"fast": {TimeToFirstToken: caddy.Duration(fastTTFT), TokensPerSecond: fastRate},
			"slow": {TimeToFirstToken: caddy.Duration(slowTTFT), TokensPerSecond: slowRate},
		}
	}
	if err := h.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", simAddr)
	if err != nil {
		t.Fatalf("the load tests serve the simulator on %s: %v", simAddr, err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h.ServeHTTP(w, r, nil); err != nil {
			t.Errorf("simulator: %v", err)
		}
	}))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}
