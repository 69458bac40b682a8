package caddymodule

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/testutil/otlpsink"
)

// blackHole accepts connections and never answers, as a collector behind a
// firewall that drops packets, or a hung one, does.
type blackHole struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	done  chan struct{}
}

func startBlackHole(t *testing.T, addr string) *blackHole {
	b := &blackHole{ln: listenFaults(t, addr), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		for {
			c, err := b.ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
		}
	}()
	return b
}

func (b *blackHole) close() {
	_ = b.ln.Close()
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		_ = c.Close()
	}
}

// slowCollector is an OTLP/gRPC trace receiver that takes delay to answer
// each export.
type slowCollector struct {
	collectortrace.UnimplementedTraceServiceServer
	delay    time.Duration
	received atomic.Int64
	srv      *grpc.Server
	done     chan struct{}
}

func startSlowCollector(t *testing.T, addr string, delay time.Duration) *slowCollector {
	c := &slowCollector{delay: delay, srv: grpc.NewServer(), done: make(chan struct{})}
	collectortrace.RegisterTraceServiceServer(c.srv, c)
	ln := listenFaults(t, addr)
	go func() {
		defer close(c.done)
		_ = c.srv.Serve(ln)
	}()
	return c
}

func (c *slowCollector) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	select {
	case <-time.After(c.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for _, rs := range req.GetResourceSpans() {
		own := false
		for _, kv := range rs.GetResource().GetAttributes() {
			own = own || kv.GetKey() == "service.name" && kv.GetValue().GetStringValue() == faultsService
		}
		for _, ss := range rs.GetScopeSpans() {
			if own {
				c.received.Add(int64(len(ss.GetSpans())))
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (c *slowCollector) close() {
	c.srv.Stop()
	<-c.done
}

// exporterFault is what listens on the OTLP endpoint during a test.
type exporterFault struct {
	name string
	// start puts the fault in place; stop removes it (nil: nothing to
	// remove). received counts the spans the endpoint took, if it takes
	// any.
	start func(t *testing.T) (stop func(), received func() int64)
	// resumes is whether the test then starts a healthy sink on the same
	// port and waits for export to resume.
	resumes bool
	// wantFailures: exports must have failed and been logged.
	wantFailures bool
	// noFailures: no export may fail (the endpoint answers each one
	// well within the export timeout).
	noFailures bool
	// holdsSpans: the endpoint keeps in this process's heap every span it
	// receives, so the heap's growth is not tokentap's.
	holdsSpans bool
}

// Sizes of the exporter fault test. The queue is small so that the load
// overflows it while the endpoint is faulty.
const (
	faultsQueueSize = 64
	faultsBatchSize = 16
	faultsLoadTime  = 3 * time.Second
	// faultsMaxHeapGrowth bounds the live heap's growth over the load with
	// a faulty endpoint, as docs/RELIABILITY.md states it: about twice
	// what tokentap's queue and connections hold.
	faultsMaxHeapGrowth = 2 << 20
)

// TestExporterFaults: with the OTLP endpoint refusing connections,
// black-holed (accepting and never answering) or slow, streams through
// tokentap keep their latency, the span queue stays within its bound, every
// span is counted as exported, dropped or failed, the losses are logged,
// and export resumes when a collector listens again on the same port.
func TestExporterFaults(t *testing.T) {
	faultsExportEnv(t, "http://"+faultsOTLPAddr)
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", strconv.Itoa(faultsQueueSize))
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", strconv.Itoa(faultsBatchSize))
	// Each export attempt (with the exporter's retries) gives up after
	// one second, so a dead endpoint fails batches rather than holding
	// them for the default ten seconds.
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1000")
	saved := otelexport.ExportLogInterval
	otelexport.ExportLogInterval = 500 * time.Millisecond
	t.Cleanup(func() { otelexport.ExportLogInterval = saved })

	up := startFaultsUpstream(t)
	registerProbeUpstream(up)
	faults := []exporterFault{
		{
			name: "healthy",
			start: func(t *testing.T) (func(), func() int64) {
				s := startFaultsSink(t)
				return s.Close, func() int64 { return ownSpans(s) }
			},
			holdsSpans: true,
		},
		{
			name:         "connection refused",
			start:        func(t *testing.T) (func(), func() int64) { return nil, nil },
			resumes:      true,
			wantFailures: true,
		},
		{
			name: "black-holed",
			start: func(t *testing.T) (func(), func() int64) {
				b := startBlackHole(t, faultsOTLPAddr)
				return b.close, nil
			},
			resumes:      true,
			wantFailures: true,
		},
		{
			name: "slow (300 ms per export)",
			start: func(t *testing.T) (func(), func() int64) {
				c := startSlowCollector(t, faultsOTLPAddr, 300*time.Millisecond)
				return c.close, c.received.Load
			},
			// 300 ms per export against a 1 s timeout.
			noFailures: true,
		},
	}
	var healthy *exporterLoad
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			stop, received := f.start(t)
			stopped := false
			stopFault := func() {
				if stop != nil && !stopped {
					stop()
					stopped = true
				}
			}
			defer stopFault()
			fc := startFaultsCaddy(t, faultsUpSite)
			before := otelexport.SpanExportCounts()
			runtime.GC()
			var m0 runtime.MemStats
			runtime.ReadMemStats(&m0)

			load := runExporterLoad(t)
			// The live heap right after the load, with the queue as full
			// as the fault left it.
			runtime.GC()
			var m1 runtime.MemStats
			runtime.ReadMemStats(&m1)
			requests := int64(load.requests)

			var sink *otlpsink.Sink
			resumeProbes := int64(0)
			var resumedAfter time.Duration
			if f.resumes {
				stopFault()
				sink = startFaultsSink(t)
				defer sink.Close()
				received = func() int64 { return ownSpans(sink) }
				resumeProbes, resumedAfter = waitExportResumes(t, sink)
			}
			total := requests + resumeProbes
			// Every span ends exported, dropped or failed once the
			// queue has drained.
			var after otelexport.ExportCounts
			deadline := time.Now().Add(30 * time.Second)
			for {
				after = otelexport.SpanExportCounts()
				done := (after.Exported - before.Exported) + (after.Dropped - before.Dropped) + (after.Failed - before.Failed)
				if done == total && after.Queued == before.Queued {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d spans ended, %d accounted for (%+v then %+v)", total, done, before, after)
				}
				time.Sleep(20 * time.Millisecond)
			}
			exported := after.Exported - before.Exported
			dropped := after.Dropped - before.Dropped
			failed := after.Failed - before.Failed
			if received != nil {
				// What the endpoint received is what was counted as
				// exported, plus at most the batches that reached it
				// after the exporter had given up waiting for the
				// answer (counted as failed).
				var got int64
				for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					if got = received(); got >= exported || time.Now().After(deadline) {
						break
					}
				}
				if got < exported || got > exported+failed {
					t.Errorf("the endpoint received %d spans; %d were counted as exported and %d as failed", got, exported, failed)
				}
			}
			if load.maxQueued > faultsQueueSize {
				t.Errorf("%d spans queued at once, over the bound of %d", load.maxQueued, faultsQueueSize)
			}
			if f.wantFailures && failed == 0 {
				t.Errorf("no export failed while the endpoint was %s", f.name)
			}
			if f.noFailures && failed != 0 {
				t.Errorf("%d spans failed to export while the endpoint was %s", failed, f.name)
			}
			// With the endpoint faulty, the spans go nowhere, so the
			// live heap after the load is what tokentap holds: its
			// queue (64 spans) and its connections, about half of
			// faultsMaxHeapGrowth. Holding the thousands of spans
			// dropped would take several MiB. The healthy endpoint is
			// the test's own sink, which keeps every span it receives.
			if grew := int64(m1.HeapAlloc) - int64(m0.HeapAlloc); !f.holdsSpans && grew > faultsMaxHeapGrowth {
				t.Errorf("the live heap grew by %d KiB with the exporter %s, over %d KiB", grew>>10, f.name, faultsMaxHeapGrowth>>10)
			}
			log := fc.log(t)
			for _, want := range []struct {
				msg  string
				when bool
			}{
				{"trace export queue full", dropped > 0},
				{"trace export failed", failed > 0},
				{"trace export resumed", f.resumes && failed > 0},
			} {
				if want.when && !strings.Contains(log, want.msg) {
					t.Errorf("Caddy's log has no %q line", want.msg)
				}
			}
			if load.badStreams > 0 {
				t.Errorf("%d of %d probe streams did not arrive byte for byte", load.badStreams, load.streams)
			}

			t.Logf("%d requests (%d streams with %d events timed): %d spans exported, %d dropped, %d failed, at most %d queued; "+
				"live heap %d KiB before, %d KiB after; per-event delay p50 %v p95 %v max %v; request p50 %v p95 %v max %v",
				total, load.streams, len(load.eventDelays), exported, dropped, failed, load.maxQueued,
				m0.HeapAlloc>>10, m1.HeapAlloc>>10,
				pct(load.eventDelays, 50), pct(load.eventDelays, 95), pct(load.eventDelays, 100),
				pct(load.requestTimes, 50), pct(load.requestTimes, 95), pct(load.requestTimes, 100))
			if f.resumes {
				t.Logf("export resumed %v after a collector listened again; %d probe requests until the first span arrived", resumedAfter, resumeProbes)
			}
			if healthy == nil {
				healthy = load
				return
			}
			// What this checks is that no event and no request waits for
			// the exporter: one that did would take the export timeout
			// (1 s) longer. Half of it is the bound, over healthy's: far
			// above what a loaded machine or the race detector adds (this
			// runs in the race suite, beside other packages' tests), so
			// the check is not a timing bound on tokentap.
			const waitedForExporter = 500 * time.Millisecond
			if got, base := pct(load.eventDelays, 50), pct(healthy.eventDelays, 50); got > base+waitedForExporter {
				t.Errorf("per-event delay p50 %v with the exporter %s, %v when healthy: events wait for the exporter", got, f.name, base)
			}
			if got, base := pct(load.requestTimes, 95), pct(healthy.requestTimes, 95); got > base+waitedForExporter {
				t.Errorf("request time p95 %v with the exporter %s, %v when healthy: requests wait for the exporter", got, f.name, base)
			}
		})
	}
}

// exporterLoad is what runExporterLoad measured.
type exporterLoad struct {
	requests     int
	streams      int
	badStreams   int
	eventDelays  []time.Duration
	requestTimes []time.Duration
	maxQueued    int64
}

// registerProbeUpstream makes the upstream answer /quick with a short
// complete stream at once, and /stamped with a stream of 40 events 5 ms
// apart, each preceded by an SSE comment with its send time, and the
// sha256 of all it sent in a trailer.
func registerProbeUpstream(up *faultsUpstream) {
	quick := chatStream("gpt-quick", 3)
	up.handle("/quick", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(quick)
	})
	up.handle("/stamped", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Trailer", "X-Sent-Sha256")
		h := sha256.New()
		rc := http.NewResponseController(w)
		var buf []byte
		for i := 0; i <= 40; i++ {
			ev := chatEvent("gpt-probe", " word")
			if i == 40 {
				ev = []byte(chatTail("gpt-probe", 40))
			}
			buf = append(buf[:0], ": sent="...)
			buf = strconv.AppendInt(buf, time.Now().UnixNano(), 10)
			buf = append(append(buf, '\n'), ev...)
			h.Write(buf)
			if _, err := w.Write(buf); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		w.Header().Set("X-Sent-Sha256", fmt.Sprintf("%x", h.Sum(nil)))
	})
}

// runExporterLoad sends quick requests, 8 at a time, for faultsLoadTime,
// while four clients stream timed probes through the proxy, and samples the
// span queue throughout.
func runExporterLoad(t *testing.T) *exporterLoad {
	t.Helper()
	client := faultsClient()
	defer client.CloseIdleConnections()
	load := &exporterLoad{}
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup

	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if q := otelexport.SpanExportCounts().Queued; q > load.maxQueued {
					mu.Lock()
					load.maxQueued = max(load.maxQueued, q)
					mu.Unlock()
				}
			}
		}
	}()

	probesDone := make(chan struct{})
	var probes sync.WaitGroup
	for p := 0; p < 4; p++ {
		probes.Add(1)
		go func() {
			defer probes.Done()
			for {
				select {
				case <-probesDone:
					return
				default:
				}
				delays, ok, err := streamProbe(client)
				mu.Lock()
				if err == nil {
					load.streams++
					load.requests++
					load.eventDelays = append(load.eventDelays, delays...)
					if !ok {
						load.badStreams++
					}
				}
				mu.Unlock()
				if err != nil {
					t.Errorf("probe stream: %v", err)
					return
				}
			}
		}()
	}

	var burst sync.WaitGroup
	end := time.Now().Add(faultsLoadTime)
	for w := 0; w < 8; w++ {
		burst.Add(1)
		go func() {
			defer burst.Done()
			for time.Now().Before(end) {
				start := time.Now()
				resp, err := client.Post(faultsProxyURL+"/up/quick", "application/json", strings.NewReader(`{"model":"gpt-quick","stream":true}`))
				if err != nil {
					t.Errorf("quick request: %v", err)
					continue
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				d := time.Since(start)
				mu.Lock()
				load.requests++
				load.requestTimes = append(load.requestTimes, d)
				mu.Unlock()
				if err != nil {
					t.Errorf("quick request body: %v", err)
				}
			}
		}()
	}
	burst.Wait()
	close(probesDone)
	probes.Wait()
	close(stop)
	wg.Wait()
	return load
}

// streamProbe reads one timed stream: the delay of each event from the
// upstream's send stamp to its arrival here, and whether the bytes match
// what the upstream says it sent.
func streamProbe(client *http.Client) (delays []time.Duration, intact bool, err error) {
	resp, err := client.Post(faultsProxyURL+"/up/stamped", "application/json", strings.NewReader(`{"model":"gpt-probe","stream":true}`))
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	h := sha256.New()
	br := bufio.NewReader(io.TeeReader(resp.Body, h))
	for {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, false, err
		}
		if ns, ok := bytes.CutPrefix(bytes.TrimSuffix(line, []byte("\n")), []byte(": sent=")); ok {
			sent, perr := strconv.ParseInt(string(ns), 10, 64)
			if perr != nil {
				return nil, false, perr
			}
			delays = append(delays, time.Since(time.Unix(0, sent)))
		}
	}
	return delays, resp.Trailer.Get("X-Sent-Sha256") == fmt.Sprintf("%x", h.Sum(nil)), nil
}

// waitExportResumes sends a request every 200 ms until the span of one of
// them reaches the sink, and says how many it took and how long.
func waitExportResumes(t *testing.T, sink *otlpsink.Sink) (probes int64, after time.Duration) {
	t.Helper()
	client := faultsClient()
	defer client.CloseIdleConnections()
	start := time.Now()
	ids := map[string]bool{}
	var idsMu sync.Mutex
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	found := make(chan struct{})
	go func() {
		defer close(found)
		_, _ = sink.WaitFor(ctx, func(s otlpsink.Span) bool {
			idsMu.Lock()
			defer idsMu.Unlock()
			return ids[s.TraceID]
		})
	}()
	for {
		tc := newTraceContext(t)
		idsMu.Lock()
		ids[tc.traceID] = true
		idsMu.Unlock()
		req, _ := http.NewRequest("POST", faultsProxyURL+"/up/quick", strings.NewReader(`{"model":"gpt-quick","stream":true}`))
		req.Header.Set("traceparent", tc.header)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		probes++
		select {
		case <-found:
			if ctx.Err() != nil {
				t.Fatalf("export did not resume within %v of a collector listening again", time.Since(start))
			}
			return probes, time.Since(start)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ownSpans counts the spans the sink received from this process.
func ownSpans(s *otlpsink.Sink) int64 {
	var n int64
	for _, sp := range s.Spans() {
		if sp.Resource["service.name"] == faultsService {
			n++
		}
	}
	return n
}

// pct is the p-th percentile of ds (100: the maximum).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s) - 1) * p / 100
	return s[i].Round(10 * time.Microsecond)
}
