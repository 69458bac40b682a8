package caddymodule

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/testutil/otlpsink"
)

// TestClientFaults: a client that leaves before the first byte or in the
// middle of a stream costs nothing but its own exchange: the upstream
// request is cancelled, the span says client_abort, and no goroutine is
// left behind.
func TestClientFaults(t *testing.T) {
	sink, up := startFaultsStack(t, faultsUpSite)
	tests := []struct {
		name string
		// events is how many events the client reads before it leaves
		// (0: it leaves before the first byte).
		events int
	}{
		{"abort before the first byte", 0},
		{"abort mid-stream", 3},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := fmt.Sprintf("/client%d", i)
			upstreamSaw := make(chan string, 1)
			up.handle(path, func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if tt.events == 0 {
					// Think for a long time before answering.
					select {
					case <-r.Context().Done():
						upstreamSaw <- "cancelled"
					case <-time.After(20 * time.Second):
						upstreamSaw <- "never cancelled"
					}
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				for n := 0; n < 2000; n++ {
					if !writeFlushed(w, chatEvent("gpt-faults", " word"), 1<<10) {
						upstreamSaw <- "write failed"
						return
					}
					select {
					case <-r.Context().Done():
						upstreamSaw <- "cancelled"
						return
					case <-time.After(10 * time.Millisecond):
					}
				}
				upstreamSaw <- "never cancelled"
			})
			client := faultsClient()
			warm(t, sink, client, up)
			client.CloseIdleConnections()
			runtime.GC()
			time.Sleep(100 * time.Millisecond)
			baseline := runtime.NumGoroutine()

			// Each exchange repeated, so that a goroutine left behind
			// per exchange would stand out from the noise.
			var a map[string]any
			for round := 0; round < clientFaultRounds; round++ {
				a = abortOnce(t, client, sink, path, tt.events, upstreamSaw)
			}
			client.CloseIdleConnections()
			n := goroutinesSettle(t, baseline, 4, 10*time.Second)
			t.Logf("%d exchanges, each: upstream request cancelled, span outcome %v, output tokens %v (%v), status %v; goroutines %d after, baseline %d",
				clientFaultRounds, a["tokentap.outcome"], a["gen_ai.usage.output_tokens"], a["tokentap.usage.source"], a["http.response.status_code"], n, baseline)
		})
	}
}

// clientFaultRounds is how many times each client fault is repeated.
const clientFaultRounds = 10

// abortOnce makes one request that the client abandons after reading events
// events (0: before the first byte), checks that the upstream's request was
// cancelled and what the span says, and returns the span's attributes.
func abortOnce(t *testing.T, client *http.Client, sink *otlpsink.Sink, path string, events int, upstreamSaw chan string) map[string]any {
	t.Helper()
	tc := newTraceContext(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", faultsProxyURL+"/up"+path,
		strings.NewReader(`{"model":"gpt-faults","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("traceparent", tc.header)
	var readErr error
	if events == 0 {
		time.AfterFunc(300*time.Millisecond, cancel)
		_, readErr = client.Do(req)
	} else {
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(resp.Body)
		for n := 0; n < events; {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if line == "\n" {
				n++
			}
		}
		cancel()
		_, readErr = io.Copy(io.Discard, br)
		resp.Body.Close()
	}
	if !errors.Is(readErr, context.Canceled) {
		t.Errorf("client error %v, want its own cancellation", readErr)
	}
	select {
	case saw := <-upstreamSaw:
		if saw != "cancelled" && saw != "write failed" {
			t.Errorf("upstream: %s, want its request cancelled", saw)
		}
	case <-time.After(10 * time.Second):
		t.Error("the upstream request was never cancelled")
	}
	a := waitSpan(t, sink, tc, 10*time.Second).Attributes
	if a["tokentap.outcome"] != "client_abort" {
		t.Errorf("outcome %v, want client_abort", a["tokentap.outcome"])
	}
	if et, ok := a["error.type"]; ok {
		t.Errorf("error.type %v: a client leaving is not an upstream error", et)
	}
	out, _ := a["gen_ai.usage.output_tokens"].(int64)
	if events > 0 && (out < int64(events) || a["tokentap.usage.source"] != "estimated") {
		t.Errorf("output tokens %v (%v), want at least the %d the client read, estimated", a["gen_ai.usage.output_tokens"], a["tokentap.usage.source"], events)
	}
	// reverse_proxy answers a client gone before the first byte with a
	// 499 of its own; the span keeps it, as Caddy's access log does.
	if events == 0 && a["http.response.status_code"] != int64(499) {
		t.Errorf("http.response.status_code %v, want 499", a["http.response.status_code"])
	}
	return a
}

// warm makes one quick exchange through the proxy and the upstream, so
// that the proxy's connection to the upstream exists before a goroutine
// baseline is taken.
func warm(t *testing.T, sink *otlpsink.Sink, client *http.Client, up *faultsUpstream) {
	t.Helper()
	up.handle("/warm", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(chatStream("gpt-warm", 3))
	})
	tc := newTraceContext(t)
	req, _ := http.NewRequest("POST", faultsProxyURL+"/up/warm", strings.NewReader(`{"model":"gpt-warm","stream":true}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", tc.header)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The exchange ends (tokens counted, span exported) after the client
	// has its last byte; a baseline taken before then would count that
	// work's memory against whatever the test measures next.
	waitSpan(t, sink, tc, 10*time.Second)
}

// slowReaderTotal is what the upstream sends to the slow reader: far more
// than the kernel's socket buffers on both sides can hold, so the only way
// for the upstream to get ahead of the client would be tokentap buffering.
const slowReaderTotal = 64 << 20

// The slow reader's bounds, which docs/RELIABILITY.md states: about twice
// the most the kernel's buffers let the upstream get ahead, and
// a growth of the live heap far below any buffering that matters.
const (
	slowReaderMaxAhead      = 20 << 20
	slowReaderMaxHeapGrowth = 640 << 10
)

// TestSlowReader: a client that reads slowly holds the upstream back
// instead of making tokentap buffer the difference. While the client
// crawls, the upstream stalls far short of the whole body and the
// process's heap stays flat; then the client reads the rest at full speed
// and gets every byte.
func TestSlowReader(t *testing.T) {
	sink, up := startFaultsStack(t, faultsUpSite)
	var written, events atomic.Int64
	sent := make(chan [32]byte, 1)
	up.handle("/firehose", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		h := sha256.New()
		// Events of about 1 KiB, different from each other, written in
		// 64 KiB pieces as fast as the connection takes them.
		var piece []byte
		for n := 0; written.Load() < slowReaderTotal; n++ {
			piece = append(piece, chatEvent("gpt-firehose", fmt.Sprintf(" %d%s", n, strings.Repeat("x", 900)))...)
			events.Add(1)
			if len(piece) < 64<<10 {
				continue
			}
			h.Write(piece)
			if !writeFlushed(w, piece, len(piece)) {
				return
			}
			written.Add(int64(len(piece)))
			piece = piece[:0]
		}
		tail := []byte(chatTail("gpt-firehose", 0))
		h.Write(tail)
		if writeFlushed(w, tail, len(tail)) {
			written.Add(int64(len(tail)))
			events.Add(3) // the finish, the usage and [DONE]
		}
		var sum [32]byte
		copy(sum[:], h.Sum(nil))
		sent <- sum
	})

	client := faultsClient()
	defer client.CloseIdleConnections()
	// One exchange first, without usage, so that what the first one
	// loads for good (the tokenizer's vocabulary, several MiB:
	// TestVocabularyMemory) is in the baseline.
	warm(t, sink, client, up)

	tc := newTraceContext(t)
	// The stream reports its usage, as the request asks, so no tokenizer
	// runs over the 64 MiB of text: this test is about buffering.
	req, _ := http.NewRequest("POST", faultsProxyURL+"/up/firehose",
		strings.NewReader(`{"model":"gpt-firehose","stream":true,"stream_options":{"include_usage":true}}`))
	req.Header.Set("traceparent", tc.header)
	heapBase, basePicks := settledHeap()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h := sha256.New()
	var read int64
	buf := make([]byte, 16<<10)
	// Crawl: 16 KiB every 10 ms (1.6 MB/s) for 3 s.
	var maxAhead int64
	var heapMax uint64
	var m runtime.MemStats
	crawlEnd := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(crawlEnd); i++ {
		n, err := io.ReadFull(resp.Body, buf)
		h.Write(buf[:n])
		read += int64(n)
		if err != nil {
			t.Fatalf("slow read: %v after %d bytes", err, read)
		}
		maxAhead = max(maxAhead, written.Load()-read)
		if i%20 == 0 {
			runtime.GC()
			runtime.ReadMemStats(&m)
			heapMax = max(heapMax, m.HeapAlloc)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The live heap once the upstream has stalled, the client pausing
	// too: what is held for the slow client, without the upstream's own
	// garbage from producing.
	heapStalled, stalledPicks := settledHeap()
	stalledAt := written.Load()
	// Then read the rest at full speed.
	n, err := io.CopyBuffer(h, resp.Body, buf)
	read += n
	if err != nil {
		t.Fatalf("fast read: %v", err)
	}
	var want [32]byte
	select {
	case want = <-sent:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream never finished")
	}
	if got := h.Sum(nil); string(got) != string(want[:]) || read != written.Load() {
		t.Errorf("client read %d bytes (sha256 %x), upstream sent %d (sha256 %x)", read, got[:6], written.Load(), want[:6])
	}
	// The kernel's loopback socket buffers hold several MiB between the
	// upstream and the client; tokentap buffering would let the upstream
	// send all 64 MiB at once.
	if maxAhead > slowReaderMaxAhead {
		t.Errorf("the upstream got %d MiB out while the client had read %d MiB, at most %d MiB ahead: over %d MiB, something buffered",
			stalledAt>>20, (read-n)>>20, maxAhead>>20, slowReaderMaxAhead>>20)
	}
	// What the exchange holds while the client crawls: connection and
	// copy buffers, the upstream handler's own 64 KiB piece; buffering
	// the stream would hold MiB.
	if grew := int64(heapStalled) - int64(heapBase); grew > slowReaderMaxHeapGrowth {
		t.Errorf("the live heap grew by %d KiB while the client crawled, over %d KiB (readings before %v KiB, stalled %v KiB)",
			grew>>10, slowReaderMaxHeapGrowth>>10, basePicks, stalledPicks)
	}
	span := waitSpan(t, sink, tc, 10*time.Second)
	if span.Attributes["tokentap.outcome"] != "completed" || span.Attributes["tokentap.chunks"] != events.Load() {
		t.Errorf("span: outcome %v, %v chunks; the upstream sent %d events", span.Attributes["tokentap.outcome"], span.Attributes["tokentap.chunks"], events.Load())
	}
	t.Logf("crawling at 1.6 MB/s for 3 s, the client read %d MiB while the upstream had sent %d MiB (at most %d MiB ahead, in the kernel's socket buffers); "+
		"live heap %d KiB before, %d KiB with the upstream stalled (%d KiB at most while it produced); then %d MiB at full speed, sha256 %x identical; span outcome %v, %v chunks",
		(read-n)>>20, stalledAt>>20, maxAhead>>20, heapBase>>10, heapStalled>>10, heapMax>>10, n>>20, want[:6], span.Attributes["tokentap.outcome"], span.Attributes["tokentap.chunks"])
}

// liveHeap is the heap's live bytes: after two collections, so that what
// sync.Pools held at the first (kept one more cycle in their victim
// caches) is gone too, and two readings compare what the program holds.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// settledHeap is the median of five live-heap readings 100 ms apart,
// and the readings in KiB. Memory an exchange holds is there at every
// reading; what other goroutines of the test process allocate and free
// around it (timers, the exporter, the previous test's connections
// closing) shows in one reading or two, and the median leaves it out
// on both sides of a comparison.
func settledHeap() (uint64, []uint64) {
	var r [5]uint64
	for i := range r {
		if i > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		r[i] = liveHeap()
	}
	kib := make([]uint64, len(r))
	for i, v := range r {
		kib[i] = v >> 10
	}
	s := r
	slices.Sort(s[:])
	return s[len(s)/2], kib
}
