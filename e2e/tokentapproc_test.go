package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// tokentapProc is a tokentap binary running on a Caddyfile. The
// official-client tests and the reliability tests both run theirs this way:
// they differ in timeouts, environment and what they look for in the
// output, not in how a process is started, awaited and stopped.
type tokentapProc struct {
	// name is what messages call the process ("tokentap", "simulator").
	name    string
	cmd     *exec.Cmd
	out     *syncBuffer
	exited  chan struct{}
	waitErr error
	// stopTimeout is how long the process gets to exit after SIGINT.
	stopTimeout time.Duration
}

// tokentapRun says how to run one tokentapProc.
type tokentapRun struct {
	name string
	bin  string
	// dir is the process's working directory, where its Caddyfile is
	// written and under which Caddy keeps its autosaved config and data.
	dir       string
	caddyfile string
	// env is the whole environment but for the XDG directories.
	env []string
	// waitDelay is exec.Cmd.WaitDelay: how long Wait waits for the
	// output once the process has exited.
	waitDelay   time.Duration
	stopTimeout time.Duration
	// afterStop, when set, looks at the output once the process has been
	// stopped at the end of the test.
	afterStop func(out string)
}

// startTokentapProc writes r.caddyfile to r.dir and runs the binary on it,
// and stops the process at the end of the test (then calls r.afterStop).
// It does not wait for the process to answer: see waitReady.
func startTokentapProc(t *testing.T, r tokentapRun) *tokentapProc {
	t.Helper()
	config := filepath.Join(r.dir, "Caddyfile")
	if err := os.WriteFile(config, []byte(r.caddyfile), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &tokentapProc{name: r.name, out: &syncBuffer{}, exited: make(chan struct{}), stopTimeout: r.stopTimeout}
	p.cmd = exec.Command(r.bin, "run", "--config", config, "--adapter", "caddyfile")
	p.cmd.Dir = r.dir
	p.cmd.Env = append(r.env,
		// Caddy keeps its autosaved config and data under these; the
		// tests must not touch the user's.
		"XDG_CONFIG_HOME="+filepath.Join(r.dir, "config"),
		"XDG_DATA_HOME="+filepath.Join(r.dir, "data"))
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.WaitDelay = r.waitDelay
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s (%s): %v", p.name, r.bin, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Error(err)
		}
		if r.afterStop != nil {
			r.afterStop(p.out.String())
		}
	})
	return p
}

// waitReady waits until every one of urls answers HTTP, within timeout of
// the call, and fails at once if the process exits meanwhile.
func (p *tokentapProc) waitReady(t *testing.T, timeout time.Duration, urls ...string) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for _, url := range urls {
		for {
			resp, err := client.Get(url)
			if err == nil {
				resp.Body.Close()
				break
			}
			select {
			case <-p.exited:
				t.Fatalf("%s exited during startup (%v) before %s answered; output:\n%s", p.name, p.waitErr, url, p.out.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s did not answer within %v: %v", p.name, url, timeout, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// stop interrupts the process, which makes Caddy shut down gracefully and
// tokentap flush its spans, and kills it if it does not exit in time. A
// process that exited on its own before is an error: it was meant to run
// until the test ended.
func (p *tokentapProc) stop() error {
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
	<-p.exited
	return fmt.Errorf("%s did not exit within %v of SIGINT and was killed", p.name, p.stopTimeout)
}
