package loadgen

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/tokentap/tokentap/internal/simulator"
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
	handler, err := simHandler(h, func(err error) { t.Errorf("simulator: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", simAddr)
	if err != nil {
		t.Fatalf("the load tests serve the simulator on %s: %v", simAddr, err)
	}
	srv := httptest.NewUnstartedServer(handler)
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// simHandler provisions h, with the fast and slow models added, as an
// http.Handler that hands its errors to fail.
func simHandler(h simulator.Handler, fail func(error)) (http.Handler, error) {
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
		return nil, err
	}
	if err := h.Validate(); err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h.ServeHTTP(w, r, nil); err != nil {
			fail(err)
		}
	}), nil
}

// simChildEnv, set to 1, makes this package's test binary serve the
// default simulator on simAddr instead of running tests
// (startSimulatorProcess).
const simChildEnv = "TOKENTAP_LOADGEN_SIMULATOR_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(simChildEnv) == "1" {
		if err := serveSimulatorChild(); err != nil {
			fmt.Fprintln(os.Stderr, "simulator:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// serveSimulatorChild serves the default simulator on simAddr, says
// "ready" on stdout once it listens, and serves until stdin closes (the
// parent closed it or died).
func serveSimulatorChild() error {
	handler, err := simHandler(simulator.Handler{}, func(err error) { fmt.Fprintln(os.Stderr, "simulator:", err) })
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", simAddr)
	if err != nil {
		return err
	}
	go http.Serve(ln, handler)
	fmt.Println("ready")
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

// startSimulatorProcess serves the default simulator from a child process
// (this test binary, run again) and returns its base URL. The timing tests
// use it so that the load generator has its process to itself, as
// `tokentap load` has: in one process the simulator's work (parsing long
// prompts, writing every stream) takes the generator's cores for
// milliseconds at a time, and a burst's requests start late for it.
func startSimulatorProcess(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), simChildEnv+"=1")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the simulator process: %v", err)
			}
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Error("the simulator process did not stop within 10 s of its stdin closing")
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		t.Fatalf("the simulator process said %q (%v), want ready", line, err)
	}
	return "http://" + simAddr
}
