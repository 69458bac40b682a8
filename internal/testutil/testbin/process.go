package testbin

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// defaultStopTimeout is how long a process gets to exit after SIGINT
// when Config leaves it unset. Generous: under -race, or with other tests
// on two cores, Caddy takes seconds to shut down and flush its spans.
const defaultStopTimeout = 20 * time.Second

// Config says how to run one tokentap process.
type Config struct {
	// Name is what messages call the process; "tokentap" when empty.
	Name string
	// Bin is the executable, from Binary or Build.
	Bin string
	// Caddyfile is the configuration's text, written to a file of the
	// process's own. ConfigFile instead names an existing Caddyfile (the
	// repository's, say), run as it is.
	Caddyfile  string
	ConfigFile string
	// Dir is the working directory; the process's own temporary
	// directory when empty.
	Dir string
	// Env is the process's whole environment (see Environ) but for
	// XDG_CONFIG_HOME and XDG_DATA_HOME, which Start points into a
	// temporary directory: Caddy keeps its autosaved config and data
	// there, and a test must not touch the user's.
	Env []string
	// StopTimeout is how long the process gets to exit after SIGINT
	// before it is killed (20 s when zero). WaitDelay is exec.Cmd's: how
	// long, once the process has exited, a child of its that keeps the
	// output open may delay the end (StopTimeout when zero).
	StopTimeout, WaitDelay time.Duration
	// Stdout and Stderr, when set, also get the process's standard output
	// and standard error, each on its own.
	Stdout, Stderr io.Writer
	// AfterStop, when set, looks at the whole output once the process has
	// been stopped at the end of the test.
	AfterStop func(output string)
}

// Process is a tokentap binary running on a Caddyfile.
type Process struct {
	name        string
	cmd         *exec.Cmd
	out         Buffer
	exited      chan struct{} // closed when the process has exited
	waitErr     error         // valid once exited is closed
	stopTimeout time.Duration
	// ended is set once the test has seen the process exit on purpose
	// (WaitExit) or stopped it (Stop).
	ended atomic.Bool
}

// Start runs `c.Bin run --config ... --adapter caddyfile` and stops the
// process at the end of the test (then calls c.AfterStop). It does not
// wait for the process to answer: see WaitReady and WaitListening.
func Start(t testing.TB, c Config) *Process {
	t.Helper()
	if c.Name == "" {
		c.Name = "tokentap"
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = defaultStopTimeout
	}
	if c.WaitDelay == 0 {
		c.WaitDelay = c.StopTimeout
	}
	// Created before the stop is registered, so removed after it: the
	// process never outlives its files.
	home := t.TempDir()
	config := c.ConfigFile
	if config == "" {
		config = filepath.Join(home, "Caddyfile")
		if err := os.WriteFile(config, []byte(c.Caddyfile), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dir := c.Dir
	if dir == "" {
		dir = home
	}
	p := &Process{name: c.Name, exited: make(chan struct{}), stopTimeout: c.StopTimeout}
	p.cmd = exec.Command(c.Bin, "run", "--config", config, "--adapter", "caddyfile")
	p.cmd.Dir = dir
	p.cmd.Env = append(c.Env[:len(c.Env):len(c.Env)],
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"XDG_DATA_HOME="+filepath.Join(home, "data"))
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if c.Stdout != nil {
		p.cmd.Stdout = io.MultiWriter(&p.out, c.Stdout)
	}
	if c.Stderr != nil {
		p.cmd.Stderr = io.MultiWriter(&p.out, c.Stderr)
	}
	p.cmd.WaitDelay = c.WaitDelay
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s (%s): %v", p.name, c.Bin, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
		if c.AfterStop != nil {
			c.AfterStop(p.out.String())
		}
	})
	return p
}

// Output is the process's standard output and standard error so far,
// interleaved as written.
func (p *Process) Output() string { return p.out.String() }

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// WaitReady waits until every one of urls answers HTTP (any status),
// within timeout of the call, and fails at once if the process exits
// meanwhile (a bad config, a port taken).
func (p *Process) WaitReady(t testing.TB, timeout time.Duration, urls ...string) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	p.waitFor(t, timeout, urls, "answered", func(url string) error {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		return err
	})
}

// WaitListening waits until every one of addrs (host:port) accepts a TCP
// connection, within timeout of the call, and fails at once if the process
// exits meanwhile. It sends nothing, so it leaves no line in an access log.
func (p *Process) WaitListening(t testing.TB, timeout time.Duration, addrs ...string) {
	t.Helper()
	p.waitFor(t, timeout, addrs, "accepted a connection", func(addr string) error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err
	})
}

func (p *Process) waitFor(t testing.TB, timeout time.Duration, targets []string, what string, probe func(string) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, target := range targets {
		for {
			err := probe(target)
			if err == nil {
				break
			}
			select {
			case <-p.exited:
				t.Fatalf("%s exited during startup (%v) before %s %s; output:\n%s", p.name, p.waitErr, target, what, p.out.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s not %s within %v: %v", p.name, target, what, timeout, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// WaitExit waits up to timeout for the process to exit by itself, after
// the test asked it to (through the admin API's /stop, say), and returns
// how it ended; it fails the test if the process is still running. The
// stop at the end of the test then has nothing left to do.
func (p *Process) WaitExit(t testing.TB, timeout time.Duration) error {
	t.Helper()
	select {
	case <-p.exited:
		p.ended.Store(true)
		return p.waitErr
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v", p.name, timeout)
		return nil
	}
}

// Stop interrupts the process, which makes Caddy shut down gracefully and
// tokentap flush its spans, and kills it if it does not exit within the
// stop timeout. A process that exited on its own before is an error: it
// was meant to run until stopped. Start calls Stop at the end of the test;
// calling it earlier is fine, and later calls do nothing.
func (p *Process) Stop() error {
	if p.ended.Swap(true) {
		return nil
	}
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited before the test ended: %v", p.name, p.waitErr)
	default:
	}
	if err := p.cmd.Process.Signal(os.Interrupt); err == nil {
		select {
		case <-p.exited:
			return nil
		case <-time.After(p.stopTimeout):
		}
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
		return fmt.Errorf("%s did not exit within %v of SIGINT and was killed", p.name, p.stopTimeout)
	case <-time.After(p.stopTimeout):
		return fmt.Errorf("%s (pid %d) did not exit even after SIGKILL", p.name, p.Pid())
	}
}
