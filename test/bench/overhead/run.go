package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// path is one way from the client to the simulator.
type path struct {
	key    string // A, B, C or D, the letters of the interleaving
	name   string
	url    string
	proc   *process // the proxy; nil on the direct path
	client *http.Client
}

// The paths, in the order A B C D.
const (
	pathDirect = iota
	pathCaddy
	pathTokentap
	pathControl
	numPaths
)

var pathNames = [numPaths]string{"direct", "caddy", "caddy+tokentap", "caddy (A/A control)"}

// comparedPathName names the fourth path when --compare runs a second
// build there.
const comparedPathName = "caddy+tokentap (--compare build)"

// procNames name the processes' config and log files.
var procNames = [numPaths]string{"", "caddy", "tokentap", "caddy-control"}

// bench is one run's state.
type bench struct {
	o     options
	log   io.Writer
	paths [numPaths]*path
	sim   *process
	// sink is the OTLP receiver process (sink.go), and spansFile where it
	// writes what it received when it is stopped.
	sink      *process
	spansFile string

	mu sync.Mutex
	// samples[level][path] collects the measured cells' results.
	samples [][numPaths]*samples
	// byID maps the tokentap path's response ids to what the client
	// measured, for the comparison with tokentap's spans.
	byID map[string]clientView
	// loads are the 1-minute load averages read at each cell's start.
	loads []float64
}

// samples are one (level, path)'s measured results, pooled over rounds.
type samples struct {
	requests, failed int
	errors           map[string]int
	events           int64
	ttft             []int64 // ns, one per completed request
	delays           []int64 // ns, one per event
	// cpuTicks is the proxy's CPU over the level, from its first cell to
	// the drain after the last (bench.level); cellTicks only inside its
	// own cells.
	cpuTicks, cellTicks int64
	// cells are the proxy's own cells, in the order they ran.
	cells []cellCPU
	wall  time.Duration
}

// cellCPU is one cell of a proxy's: its CPU ticks inside the cell and the
// events its client received. Cell to cell they show how much one path's
// CPU per event moves within a run (docs/BENCHMARKS.md).
type cellCPU struct {
	Round  int   `json:"round"`
	Ticks  int64 `json:"cpu_ticks"`
	Events int64 `json:"events"`
}

// clientView is one tokentap-path request as the client measured it.
type clientView struct {
	level int
	ttft  time.Duration
	rate  float64
}

// run runs the benchmark and returns its report. A report is returned with
// an error when the failure came after some figures were measured.
func run(ctx context.Context, o options, log io.Writer) (*report, error) {
	began := time.Now()
	dir := o.workDir
	keep := dir != ""
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "tokentap-overhead-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if ok && !keep {
			os.RemoveAll(dir)
		} else {
			fmt.Fprintf(log, "configs and logs kept in %s\n", dir)
		}
	}()

	if o.binary == "" {
		fmt.Fprintln(log, "building ./cmd/tokentap ...")
		var err error
		if o.binary, err = buildBinary(ctx, dir); err != nil {
			return nil, err
		}
	}

	b := &bench{o: o, log: log, byID: map[string]clientView{}}
	b.samples = make([][numPaths]*samples, len(o.levels))
	for i := range b.samples {
		for p := range numPaths {
			b.samples[i][p] = &samples{errors: map[string]int{}}
		}
	}
	rep := &report{Started: began, Machine: describeMachine(o.binary), Command: commandLine(), Settings: settingsOf(o)}
	la := loadAverages()
	rep.LoadAverage.Start, rep.LoadAverage.Start5, rep.LoadAverage.Start15 = la[0], la[1], la[2]
	rep.Commit, rep.Dirty = checkout(ctx)

	// Deferred before start: a start that fails half-way must still stop
	// what it started.
	defer b.stop()
	if err := b.start(ctx, dir); err != nil {
		return nil, err
	}

	var errs []error
	if o.suite != "" {
		suite, err := b.runSuite(ctx)
		rep.Suite = suite
		b.stop()
		rep.LoadAverage.End = loadAverage()
		rep.Seconds = time.Since(began).Seconds()
		ok = err == nil
		return rep, err
	}
	fmt.Fprintf(log, "memory per open stream: %d streams per proxy\n", o.rssStreams)
	mem, err := b.memory(ctx)
	rep.Memory = mem
	if err != nil {
		errs = append(errs, fmt.Errorf("memory: %w", err))
	}
	for li, lv := range o.levels {
		if ctx.Err() != nil {
			break
		}
		if err := b.level(ctx, li, lv); err != nil {
			errs = append(errs, fmt.Errorf("concurrency %d: %w", lv.Concurrency, err))
		}
	}
	if o.profile != "" && ctx.Err() == nil {
		if err := b.takeProfile(ctx); err != nil {
			errs = append(errs, fmt.Errorf("profile: %w", err))
		}
	}
	// Everything is stopped before the figures are built: the spans are
	// complete only once tokentap has flushed and the sink written them.
	b.stop()
	rep.LoadAverage.End = loadAverage()
	rep.build(b)
	rep.Seconds = time.Since(began).Seconds()
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	ok = len(errs) == 0
	return rep, errors.Join(errs...)
}

// start launches the sink, the simulator and the three proxies.
func (b *bench) start(ctx context.Context, dir string) error {
	o := b.o
	addr := func(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
	simAddr := addr(o.portBase)
	sinkAddr := addr(o.portBase + 9)
	taken := []string{sinkAddr}
	for i := range numPaths {
		taken = append(taken, addr(o.portBase+i), addr(o.adminBase+i))
	}
	if err := checkFree(taken...); err != nil {
		return err
	}

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	b.spansFile = filepath.Join(dir, "spans.jsonl")
	sinkArgv := []string{exe, "sink", "--listen", sinkAddr, "--out", b.spansFile}
	if b.sink, err = startProcess(ctx, dir, "otlp-sink", sinkArgv, nil, func(ctx context.Context, p *process) error {
		return waitTCP(ctx, p, sinkAddr)
	}); err != nil {
		return err
	}
	fmt.Fprintf(b.log, "starting the simulator and three proxies from %s\n", o.binary)
	if b.sim, err = startCaddy(ctx, o.binary, dir, "simulator", simCaddyfile(addr(o.adminBase), o.portBase), simAddr, nil); err != nil {
		return err
	}
	// All three proxies get the same environment, so that only their
	// configs differ: tokentap exports spans and metrics to the sink, as
	// it would to a collector, with the SDK's default schedule and a
	// queue large enough that no span of a run is dropped.
	env := []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + sinkAddr,
		"OTEL_EXPORTER_OTLP_INSECURE=true",
		"OTEL_SERVICE_NAME=tokentap-overhead",
		"OTEL_BSP_MAX_QUEUE_SIZE=65536",
	}
	b.paths[pathDirect] = &path{url: "http://" + simAddr}
	for _, p := range []int{pathCaddy, pathTokentap, pathControl} {
		a := addr(o.portBase + p)
		binary, tokentap := o.binary, p == pathTokentap
		if p == pathControl && o.compare != "" {
			binary, tokentap = o.compare, true
		}
		conf := proxyCaddyfile(addr(o.adminBase+p), o.portBase+p, simAddr, tokentap)
		proc, err := startCaddy(ctx, binary, dir, procNames[p], conf, a, env)
		if err != nil {
			return err
		}
		b.paths[p] = &path{url: "http://" + a, proc: proc}
	}
	for p := range numPaths {
		b.paths[p].key = string(rune('A' + p))
		b.paths[p].name = pathNames[p]
		b.paths[p].client = newBenchClient()
	}
	if o.compare != "" {
		b.paths[pathControl].name = comparedPathName
	}
	return nil
}

// stop stops every process started: the proxies first, so that tokentap
// flushes its last spans to the sink, and the sink last, so that it has
// them all when it writes them out. It may be called twice.
func (b *bench) stop() {
	for _, p := range b.paths {
		if p != nil && p.proc != nil {
			p.proc.stop()
		}
	}
	for _, p := range []*process{b.sim, b.sink} {
		if p != nil {
			p.stop()
		}
	}
}

// newBenchClient is a path's own client: a connection pool larger than
// any level, kept across cells so that no cell pays for the last one's
// connections, and no compression, so that events are timed on arrival.
func newBenchClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     10 * time.Minute,
		DisableCompression:  true,
	}}
}
