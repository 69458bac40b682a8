package testbin

import (
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestStartWaitStop runs a fake tokentap through its whole life: started on
// a Caddyfile of its own, waited for, its output kept whole and each stream
// to its own writer, stopped by SIGINT at the end of the test.
func TestStartWaitStop(t *testing.T) {
	addr := FreeAddr(t)
	var stdout, stderr Buffer
	var after string
	t.Run("run", func(t *testing.T) {
		c := fake(t, "listen "+addr)
		c.Stdout, c.Stderr = &stdout, &stderr
		c.AfterStop = func(out string) { after = out }
		p := Start(t, c)
		p.WaitListening(t, 10*time.Second, addr)
		p.WaitReady(t, 10*time.Second, "http://"+addr+"/")
		if p.Pid() <= 0 {
			t.Errorf("pid %d", p.Pid())
		}
		out := p.Output()
		if !strings.Contains(out, "fake stdout") || !strings.Contains(out, "fake stderr") {
			t.Errorf("output %q lacks a stream", out)
		}
		xdg := regexp.MustCompile(`XDG_CONFIG_HOME=(\S+) XDG_DATA_HOME=(\S+)\n`).FindStringSubmatch(out)
		if xdg == nil || xdg[1] == xdg[2] || !filepath.IsAbs(xdg[1]) || !filepath.IsAbs(xdg[2]) {
			t.Errorf("the XDG directories are not two directories of the process's own: %q", out)
		}
	})
	if !strings.Contains(stdout.String(), "fake stdout") || strings.Contains(stdout.String(), "fake stderr") {
		t.Errorf("Stdout got %q", stdout.String())
	}
	if stderr.String() != "fake stderr\n" {
		t.Errorf("Stderr got %q", stderr.String())
	}
	if !strings.Contains(after, "fake stdout") {
		t.Errorf("AfterStop got %q", after)
	}
	WaitFree(t, 10*time.Second, addr)
}

// TestWaitExit: a process the test asked to exit ends without an error from
// the stop at the end of the test.
func TestWaitExit(t *testing.T) {
	addr := FreeAddr(t)
	p := Start(t, fake(t, "listen "+addr))
	p.WaitReady(t, 10*time.Second, "http://"+addr+"/")
	if resp, err := http.Get("http://" + addr + "/stop"); err == nil {
		resp.Body.Close()
	}
	if err := p.WaitExit(t, 10*time.Second); err != nil {
		t.Errorf("exit: %v", err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("Stop after WaitExit: %v", err)
	}
}

// TestStopErrors: Stop reports a process that ended on its own, and one
// that had to be killed; a second Stop does nothing.
func TestStopErrors(t *testing.T) {
	for _, tc := range []struct {
		name, caddyfile, want string
	}{
		{"exited on its own", "exit 3", "fake exited before the test ended: exit status 3"},
		{"killed", "ignore-interrupt\nlisten " + FreeAddr(t), "fake did not exit within 300ms of SIGINT and was killed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake(t, tc.caddyfile)
			c.StopTimeout = 300 * time.Millisecond
			p := Start(t, c)
			if tc.caddyfile == "exit 3" {
				<-p.exited
			} else {
				// The fake handles SIGINT once it has printed its lines.
				for !strings.Contains(p.Output(), "fake stderr") {
					time.Sleep(10 * time.Millisecond)
				}
			}
			if err := p.Stop(); err == nil || err.Error() != tc.want {
				t.Errorf("Stop: %v, want %q", err, tc.want)
			}
			if err := p.Stop(); err != nil {
				t.Errorf("the second Stop: %v", err)
			}
		})
	}
}
