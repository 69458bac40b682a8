// Package e2e holds the tests that need built binaries: tokentap itself and
// the third-party programs users run it with (Jaeger v2, the OpenTelemetry
// Collector). They check what no in-process test can: that the programs a
// user downloads or builds accept tokentap's output over the wire, that the
// examples' scripts and configs start, and that the README's commands work
// as written.
//
// Each test needs its binaries in environment variables (JAEGER_BINARY,
// TOKENTAP_BINARY, OTELCOL_BINARY) and skips with a message without them,
// unless TOKENTAP_REQUIRE_E2E=1, which CI sets so that a missing binary
// fails instead of passing silently. .ci/e2e-jaeger builds them and runs
// these tests.
package e2e

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

const (
	// jaegerStartupTimeout bounds how long a script may take to report ready.
	// Generous: under -race or with other tests on two cores, Jaeger and
	// Caddy take seconds to start, not milliseconds.
	jaegerStartupTimeout = 90 * time.Second
	// jaegerStopTimeout is how long a script gets to stop its programs after
	// SIGTERM before its whole process group is killed.
	jaegerStopTimeout = 20 * time.Second
	// jaegerPortFreeTimeout is how long the ports may stay bound after the
	// processes are gone (the kernel closes listeners with the process,
	// but the exit itself takes a moment).
	jaegerPortFreeTimeout = 10 * time.Second
)

const (
	howToBuildJaeger  = "build it with `go -C test/tools/jaeger build -o /tmp/jaeger github.com/jaegertracing/jaeger/cmd/jaeger` and set JAEGER_BINARY to its path (or run .ci/e2e-jaeger)"
	howToBuildOtelcol = "build it with `go -C test/tools/otelcol build -o /tmp/otelcol .` and set OTELCOL_BINARY to its path (or run .ci/e2e-collector)"
)

func jaegerBinary(t *testing.T) string {
	t.Helper()
	return testbin.Executable(t, "JAEGER_BINARY", testbin.RequireE2E, howToBuildJaeger)
}

func otelcolBinary(t *testing.T) string {
	t.Helper()
	return testbin.Executable(t, "OTELCOL_BINARY", testbin.RequireE2E, howToBuildOtelcol)
}

// script is a running shell script (an example's run.sh) with everything
// it started, in a process group of its own so that nothing outlives the
// test.
type jaegerScript struct {
	cmd     *exec.Cmd
	out     *testbin.Buffer
	exited  chan struct{} // closed when the script has exited
	waitErr error         // valid once exited is closed
}

// startJaegerScript runs path with bash in dir, with env added to the test's
// environment (less OTEL_*), and registers its stop as a cleanup. The
// output is logged when the test fails.
func startJaegerScript(t *testing.T, dir, path string, env ...string) *jaegerScript {
	t.Helper()
	cmd := exec.Command("bash", path)
	cmd.Dir = dir
	cmd.Env = append(testbin.Environ("OTEL_"), env...)
	// A group of its own: the cleanup can then kill the script's children
	// too if the script fails to stop them.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s := &jaegerScript{cmd: cmd, out: &testbin.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.out, s.out
	// Bounds Wait if a child that escaped the group keeps the pipe open.
	cmd.WaitDelay = jaegerStopTimeout
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("output of %s:\n%s", filepath.Base(path), s.out.String())
		}
	})
	return s
}

// waitOutput waits until the script prints want, failing if it exits first
// or the startup timeout passes.
func (s *jaegerScript) waitOutput(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(jaegerStartupTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(s.out.String(), want) {
		select {
		case <-s.exited:
			if strings.Contains(s.out.String(), want) {
				return
			}
			t.Fatalf("the script exited (%v) before printing %q; output:\n%s", s.waitErr, want, s.out.String())
		case <-deadline:
			t.Fatalf("the script did not print %q within %v; output:\n%s", want, jaegerStartupTimeout, s.out.String())
		case <-tick.C:
		}
	}
}

// stop asks the script to stop its programs (SIGTERM, which the examples'
// scripts trap), then kills its whole process group if it has not exited
// within jaegerStopTimeout.
func (s *jaegerScript) stop() error {
	select {
	case <-s.exited:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		// Its children are stopped by its own trap; anything left in the
		// group is a bug of the script, killed here all the same.
		if err := syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL); err == nil {
			return fmt.Errorf("the script (pid %d) exited but left processes in its group; they were killed", s.cmd.Process.Pid)
		} else if !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("checking the script's process group: %v", err)
		}
		return nil
	case <-time.After(jaegerStopTimeout):
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-s.exited:
		return fmt.Errorf("the script did not stop within %v of SIGTERM; its process group was killed", jaegerStopTimeout)
	case <-time.After(jaegerStopTimeout):
		return fmt.Errorf("the script (pid %d) did not exit even after SIGKILL", s.cmd.Process.Pid)
	}
}
