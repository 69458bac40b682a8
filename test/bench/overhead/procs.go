package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// fixed at 100 by the Linux ABI on every architecture Go supports, whatever
// the kernel's own HZ.
const clockTicks = 100

// process is one child: the simulator or a proxy, each the same tokentap
// binary running its own Caddyfile.
type process struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{} // closed when the process has exited
	err    error         // Wait's result, set before exited is closed
}

// startProcess runs argv in dir, with env added to this process's
// environment and its output in dir/name.log, and waits until ready says
// it serves.
func startProcess(ctx context.Context, dir, name string, argv, env []string, ready func(context.Context, *process) error) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Caddy keeps its data and autosaved config under these; the
	// benchmark's processes must leave the user's own untouched.
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir, "HOME="+dir)
	cmd.Env = append(cmd.Env, env...)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	if err := ready(ctx, p); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// startCaddy runs the tokentap binary bin on the Caddyfile text, written to
// dir, and waits until addr answers HTTP.
func startCaddy(ctx context.Context, bin, dir, name, caddyfile, addr string, env []string) (*process, error) {
	conf := filepath.Join(dir, name+".Caddyfile")
	if err := os.WriteFile(conf, []byte(caddyfile), 0o600); err != nil {
		return nil, err
	}
	argv := []string{bin, "run", "--config", conf, "--adapter", "caddyfile"}
	return startProcess(ctx, dir, name, argv, env, func(ctx context.Context, p *process) error { return p.waitReady(ctx, addr) })
}

// readyTimeout bounds a child's start: Caddy starts in well under a second,
// but a machine busy with other builds can take many.
const readyTimeout = 60 * time.Second

func (p *process) waitReady(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		res, err := client.Get("http://" + addr + "/")
		if err == nil {
			res.Body.Close()
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before it served %s (%v); its log:\n%s", p.name, addr, p.err, p.tail())
		case <-ctx.Done():
			return fmt.Errorf("%s did not serve %s within %v; its log:\n%s", p.name, addr, readyTimeout, p.tail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tail is the end of the process's log, for error messages.
func (p *process) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// stop ends the process gracefully (Caddy flushes its exporters on SIGTERM)
// and kills it if it does not exit in time.
func (p *process) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// cpuTicks is the process's user plus system CPU time, all threads, in
// clock ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line. The command name (field 2) is in parentheses and
// may itself hold spaces and parentheses, so fields are counted from the
// last ')'.
func parseStatCPU(stat []byte) (int64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no command name")
	}
	fields := strings.Fields(string(stat[i+1:]))
	// fields[0] is field 3 (state): utime is field 14, stime field 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields after the name", len(fields))
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc stat: %w", err)
	}
	return utime + stime, nil
}

// rssBytes is the process's resident set size.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusRSS(b)
}

// parseStatusRSS reads VmRSS from /proc/<pid>/status, which the kernel
// gives in kB (KiB).
func parseStatusRSS(status []byte) (int64, error) {
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("/proc status: VmRSS %q", strings.TrimSpace(v))
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc status: VmRSS: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("/proc status: no VmRSS")
}

// loadAverage is the 1-minute load average, the figure every result is
// reported with: on a shared machine it says how much of the noise was
// other work.
func loadAverage() float64 { return loadAverages()[0] }

// loadAverages reads the 1-, 5- and 15-minute load averages, -1 for any
// that cannot be read.
func loadAverages() [3]float64 {
	out := [3]float64{-1, -1, -1}
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	for i, f := range strings.Fields(string(b)) {
		if i == len(out) {
			break
		}
		if v, err := strconv.ParseFloat(f, 64); err == nil {
			out[i] = v
		}
	}
	return out
}

// checkout names the commit the working directory's checkout is at and
// whether its tracked files differ from it; both empty outside a git
// checkout.
func checkout(ctx context.Context) (commit string, dirty bool) {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "", false
	}
	status, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output()
	return strings.TrimSpace(string(out)), err != nil || len(bytes.TrimSpace(status)) > 0
}

// checkFree fails when one of addrs is already taken, before any process
// is started: a collision would otherwise show as a child that cannot
// bind, or worse, as a benchmark of someone else's server.
func checkFree(addrs ...string) error {
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return fmt.Errorf("%s is in use (another benchmark or test?): %w", a, err)
		}
		ln.Close()
	}
	return nil
}

// simCaddyfile is the simulator process's config. Every request sets its
// own speed by headers, so the profile here is only a fallback.
func simCaddyfile(adminAddr string, port int) string {
	return fmt.Sprintf(`{
	admin %s
	persist_config off
	default_bind 127.0.0.1
}

http://:%d {
	tokentap_simulator {
		time_to_first_token 20ms
		tokens_per_second 100
		output_tokens 20
	}
}
`, adminAddr, port)
}

// proxyCaddyfile is a proxy's config: plain reverse_proxy, or tokentap in
// front of it with its defaults (spans and metrics exported over OTLP, live
// stats). Both keep as many idle upstream connections as the benchmark has
// streams, so that neither pays for new connections the other does not.
func proxyCaddyfile(adminAddr string, port int, upstream string, withTokentap bool) string {
	directive := ""
	if withTokentap {
		directive = "\ttokentap\n"
	}
	return fmt.Sprintf(`{
	admin %s
	persist_config off
	default_bind 127.0.0.1
}

http://:%d {
%s	reverse_proxy %s {
		transport http {
			keepalive_idle_conns_per_host 1024
		}
	}
}
`, adminAddr, port, directive, upstream)
}
