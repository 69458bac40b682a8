package testbin

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"testing"
	"time"
)

// fakeEnv makes this test binary act as a fake tokentap (fakeTokentap)
// instead of running the tests: the process tests start it with Start,
// which needs an executable that takes `run --config FILE`.
const fakeEnv = "TESTBIN_FAKE_TOKENTAP"

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) == "1" {
		os.Exit(fakeTokentap(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeTokentap reads its "Caddyfile", one directive a line, and does what
// it says:
//
//	listen ADDR       serve HTTP on ADDR: GET /stop makes it exit 0
//	exit CODE         exit at once with CODE
//	ignore-interrupt  do not exit on SIGINT
//
// It prints one line to stdout and one to stderr, with its XDG
// directories, and exits 0 on SIGINT.
func fakeTokentap(args []string) int {
	if len(args) != 5 || args[0] != "run" || args[1] != "--config" || args[3] != "--adapter" || args[4] != "caddyfile" {
		fmt.Fprintf(os.Stderr, "fake tokentap: unexpected arguments %q\n", args)
		return 2
	}
	config, err := os.ReadFile(args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// Handled before the lines are printed: a test that saw them may
	// interrupt the fake.
	interrupt := make(chan os.Signal, 1)
	signal.Notify(interrupt, os.Interrupt)
	fmt.Printf("fake stdout XDG_CONFIG_HOME=%s XDG_DATA_HOME=%s\n", os.Getenv("XDG_CONFIG_HOME"), os.Getenv("XDG_DATA_HOME"))
	fmt.Fprintln(os.Stderr, "fake stderr")
	ignore := false
	stop := make(chan struct{})
	for _, line := range strings.Split(string(config), "\n") {
		verb, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch verb {
		case "exit":
			var code int
			fmt.Sscan(arg, &code)
			return code
		case "ignore-interrupt":
			ignore = true
		case "listen":
			mux := http.NewServeMux()
			mux.HandleFunc("/stop", func(http.ResponseWriter, *http.Request) { close(stop) })
			go func() {
				// A moment's delay, so that waiting for it is tested.
				time.Sleep(100 * time.Millisecond)
				if err := http.ListenAndServe(arg, mux); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(3)
				}
			}()
		}
	}
	for {
		select {
		case <-stop:
			return 0
		case <-interrupt:
			if !ignore {
				return 0
			}
		}
	}
}

// fake is the Config of a fake tokentap running caddyfile.
func fake(t *testing.T, caddyfile string) Config {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Config{Name: "fake", Bin: self, Caddyfile: caddyfile, Env: append(Environ(fakeEnv), fakeEnv+"=1")}
}
