package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/testutil/testbin"
)

// The reliability tests (TestReliability*) run the built tokentap binary
// twice: once as the measuring proxy and once, as a separate process, as the
// simulator it proxies to, so that the proxy's memory and goroutines are
// its own. They read the proxy's state from the outside, as an operator
// would: goroutines from Caddy's admin /debug/pprof, the span export's
// losses from /debug/vars, memory from /proc. Their addresses are their
// own, on loopback: HTTP 9410-9429, admin 2401-2404, OTLP 4401-4402.

// relProcess is a running tokentap binary.
type relProcess struct {
	*testbin.Process
	admin string // host:port of its admin API
}

// startRel runs the binary on caddyfile with env added to a clean
// environment (no OTEL_* of the caller's). It waits until every URL in
// ready answers, and stops the process at the end of the test, logging its
// output if the test failed.
func startRel(t *testing.T, name, admin, caddyfile string, env []string, ready ...string) *relProcess {
	t.Helper()
	bin := testbin.Binary(t)
	ready = append(ready, "http://"+admin+"/config/")
	for _, u := range ready {
		testbin.RequireFree(t, relHost(u))
	}
	proc := testbin.Start(t, testbin.Config{
		Name:        name,
		Bin:         bin,
		Caddyfile:   caddyfile,
		Env:         append(testbin.Environ("OTEL_"), env...),
		WaitDelay:   10 * time.Second,
		StopTimeout: 20 * time.Second,
		AfterStop: func(out string) {
			// A binary built with -race (as .ci/reliability builds one)
			// reports data races on its output and carries on.
			if strings.Contains(out, "WARNING: DATA RACE") {
				t.Errorf("%s reported a data race:\n%s", name, out)
			}
			if t.Failed() {
				t.Logf("%s output (last lines):\n%s", name, testbin.LastLines(out, 40))
				// Why a request failed (a 502's dial or read error) is
				// logged when it happens, rarely among the last lines.
				if errs := relErrorLines(out, 20); errs != "" {
					t.Logf("%s error lines (the first 20):\n%s", name, errs)
				}
			}
		},
	})
	proc.WaitReady(t, 60*time.Second, ready...)
	return &relProcess{Process: proc, admin: admin}
}

// relHost is the host:port of an http:// URL.
func relHost(u string) string {
	host := strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://")
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	return host
}

// goroutines is the process's goroutine count, from Caddy's admin pprof.
func (p *relProcess) goroutines(t *testing.T) int {
	t.Helper()
	body := p.adminGet(t, "/debug/pprof/goroutine?debug=1")
	line, _, _ := strings.Cut(body, "\n")
	n, err := strconv.Atoi(strings.TrimPrefix(line, "goroutine profile: total "))
	if err != nil {
		t.Fatalf("goroutine profile starts %q", line)
	}
	return n
}

// goroutinesIn counts the goroutines whose stack has frame in it, from the
// full dump.
func (p *relProcess) goroutinesIn(t *testing.T, frame string) int {
	t.Helper()
	n := 0
	for _, g := range strings.Split(p.adminGet(t, "/debug/pprof/goroutine?debug=2"), "\n\n") {
		if strings.Contains(g, frame) {
			n++
		}
	}
	return n
}

// spanExport is the process's span export counts, from /debug/vars.
type relSpanExport struct {
	Queued, Exported, Dropped, Failed int64
}

func (p *relProcess) spanExport(t *testing.T) relSpanExport {
	t.Helper()
	var vars struct {
		Export *relSpanExport `json:"tokentap_span_export"`
	}
	if err := json.Unmarshal([]byte(p.adminGet(t, "/debug/vars")), &vars); err != nil || vars.Export == nil {
		t.Fatalf("/debug/vars has no tokentap_span_export: %v", err)
	}
	return *vars.Export
}

// inUse is the memory the process holds right after a garbage collection:
// its heap spans in use and its goroutines' stacks. The admin API's heap
// profile with gc=1 runs the collection; /debug/vars reads the counts.
// Resident memory would also count garbage not yet collected, which
// varies with when the collector last ran.
func (p *relProcess) inUse(t *testing.T) int64 {
	t.Helper()
	p.adminGet(t, "/debug/pprof/heap?gc=1")
	var vars struct {
		Memstats struct{ HeapInuse, StackInuse int64 } `json:"memstats"`
	}
	if err := json.Unmarshal([]byte(p.adminGet(t, "/debug/vars")), &vars); err != nil || vars.Memstats.HeapInuse == 0 {
		t.Fatalf("/debug/vars has no memstats: %v", err)
	}
	return vars.Memstats.HeapInuse + vars.Memstats.StackInuse
}

func (p *relProcess) adminGet(t *testing.T, path string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + p.admin + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
	}
	return string(b)
}

// rss reads the process's resident set size and its peak (VmRSS, VmHWM)
// in bytes.
func (p *relProcess) rss(t *testing.T) (now, peak int64) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			now = kb << 10
		case "VmHWM":
			peak = kb << 10
		}
	}
	return now, peak
}

// relSimulatorCaddyfile runs only the simulator, on addr, with its admin
// API on admin: the load and reload tests' upstream, in its own process.
func relSimulatorCaddyfile(admin, addr, profile string) string {
	return `{
	admin ` + admin + `
	persist_config off
}

http://` + addr + ` {
	bind 127.0.0.1
	tokentap_simulator {
` + profile + `
	}
}
`
}

// relFetchAll POSTs each body to url, all at once, and returns what came
// back: the simulator's deterministic answers to compare with.
func relFetchAll(t *testing.T, client *http.Client, url string, bodies []string) [][]byte {
	t.Helper()
	out := make([][]byte, len(bodies))
	errs := make([]error, len(bodies))
	var wg sync.WaitGroup
	for i, b := range bodies {
		wg.Go(func() {
			resp, err := client.Post(url, "application/json", strings.NewReader(b))
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			out[i], errs[i] = io.ReadAll(resp.Body)
			if errs[i] == nil && resp.StatusCode != 200 {
				errs[i] = fmt.Errorf("status %d: %s", resp.StatusCode, out[i])
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s, body %d: %v", url, i, err)
		}
	}
	return out
}

// relErrorLines returns the first n lines of a process's output that are
// error-level log entries.
func relErrorLines(out string, n int) string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `"level":"error"`) {
			lines = append(lines, l)
			if len(lines) == n {
				break
			}
		}
	}
	return strings.Join(lines, "\n")
}

// tcpCounters are the kernel's counters of handshakes it dropped or had to
// repeat (/proc/net/netstat, TcpExt), machine-wide: a stream that failed to
// connect while they rose met a full accept queue or a lost SYN, the
// machine's limit rather than the proxy's.
type tcpCounters map[string]int64

// tcpCounterNames are the counters tcpCounters keeps.
var tcpCounterNames = []string{"ListenOverflows", "ListenDrops", "TCPReqQFullDrop", "TCPSynRetrans", "TCPTimeouts"}

// readTCPCounters reads them; on a system without /proc/net/netstat the
// result is empty and says so when printed.
func readTCPCounters() tcpCounters {
	out := tcpCounters{}
	b, err := os.ReadFile("/proc/net/netstat")
	if err != nil {
		return out
	}
	lines := strings.Split(string(b), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || names[0] != "TcpExt:" || len(values) != len(names) {
			continue
		}
		for j, n := range names[1:] {
			if slices.Contains(tcpCounterNames, n) {
				out[n], _ = strconv.ParseInt(values[j+1], 10, 64)
			}
		}
	}
	return out
}

// since is c less before, for the counters both have.
func (c tcpCounters) since(before tcpCounters) tcpCounters {
	out := tcpCounters{}
	for n, v := range c {
		if b, ok := before[n]; ok {
			out[n] = v - b
		}
	}
	return out
}

func (c tcpCounters) String() string {
	if len(c) == 0 {
		return "not available"
	}
	var parts []string
	for _, n := range tcpCounterNames {
		if v, ok := c[n]; ok {
			parts = append(parts, fmt.Sprintf("%s %d", n, v))
		}
	}
	return strings.Join(parts, ", ")
}
