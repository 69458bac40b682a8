package recording

import (
	"bufio"
	"encoding/json"
	"io"
	"sync"
	"sync/atomic"

	"github.com/tokentap/tokentap/internal/sink"
)

// QueueLines is how many finished exchanges a Recorder holds for its
// writer: a burst of that many is written late rather than dropped.
const QueueLines = 4096

// Recorder writes a recording: it is the sink that turns each finished
// exchange into a Line, and the one goroutine that writes the lines out.
// Record never waits: when the writer is QueueLines behind (a slow or full
// disk), the line is dropped and counted in Dropped.
type Recorder struct {
	queue chan Line
	quit  chan struct{}
	done  chan struct{}
	w     io.WriteCloser
	// onError is told of the first write error after a success, so a
	// full disk is logged once, not once per line.
	onError func(error)

	written, dropped, failed atomic.Int64
	closeOnce                sync.Once
	closeErr                 error
}

// NewRecorder writes lines to w, which it closes in Close. onError, if
// set, is called from the writer goroutine with the first error of each
// run of failed writes.
func NewRecorder(w io.WriteCloser, onError func(error)) *Recorder {
	r := &Recorder{
		queue:   make(chan Line, QueueLines),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
		w:       w,
		onError: onError,
	}
	go r.run()
	return r
}

// Record queues res's line, or drops it when the queue is full or the
// recorder closed.
func (r *Recorder) Record(res *sink.Result) {
	select {
	case <-r.quit:
		r.dropped.Add(1)
		return
	default:
	}
	select {
	case r.queue <- FromResult(res):
	default:
		r.dropped.Add(1)
	}
}

// run writes queued lines, flushing whenever the queue is empty so that a
// line is on disk soon after its exchange ended, and drains the queue
// when the recorder closes.
func (r *Recorder) run() {
	defer close(r.done)
	bw := bufio.NewWriterSize(r.w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	failing := false
	// pending lines are in bw, not yet known to be on disk: they count as
	// written or failed when bw is flushed.
	pending := int64(0)
	settle := func(err error) {
		if err != nil {
			r.failed.Add(pending)
			if !failing && r.onError != nil {
				r.onError(err)
			}
			failing = true
			// A failed bufio.Writer keeps its error; start afresh so that
			// a disk that frees up is written to again.
			bw.Reset(r.w)
		} else {
			r.written.Add(pending)
			failing = false
		}
		pending = 0
	}
	write := func(l *Line) {
		pending++
		err := enc.Encode(l)
		if err != nil || len(r.queue) == 0 {
			if err == nil {
				err = bw.Flush()
			}
			settle(err)
		}
	}
	for {
		select {
		case l := <-r.queue:
			write(&l)
		case <-r.quit:
			for {
				select {
				case l := <-r.queue:
					write(&l)
				default:
					settle(bw.Flush())
					return
				}
			}
		}
	}
}

// Close writes what is queued, stops the writer and closes the file.
// Lines recorded after Close are dropped.
func (r *Recorder) Close() error {
	r.closeOnce.Do(func() {
		close(r.quit)
		<-r.done
		r.closeErr = r.w.Close()
	})
	return r.closeErr
}

// Written, Dropped and Failed count lines written, dropped because the
// writer was behind or closed, and lost to a write error.
func (r *Recorder) Written() int64 { return r.written.Load() }
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }
func (r *Recorder) Failed() int64  { return r.failed.Load() }
