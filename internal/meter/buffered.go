package meter

import "time"

// The thresholds of the buffered-stream rule (outputBurst.buffered). A
// stream is buffered when something between the model and tokentap (the
// provider's own front end, a gateway, a content filter, a proxy with
// response buffering) held the generated events back and released them at
// once: every user of it waits the whole generation for the first token
// and then sees an impossible decode rate, while its counts look right.
const (
	// bufferedMinEvents is the fewest output events a burst must hold.
	// Below it a whole answer arriving in one read is ordinary: a short
	// answer's few events, or the larger and fewer deltas of Anthropic
	// and Gemini, are often written back to back by the server and
	// coalesce in one TCP read. Sixteen events written within
	// bufferedEventSpacing each cannot come from a model decoding.
	bufferedMinEvents = 16
	// bufferedShareTenths is the share of the output events, in tenths,
	// that the burst must hold: nearly all (9 in 10), so that a stream
	// whose first event or few were let through before the rest was held
	// still counts, and one that was released in several bursts (a
	// buffer of a few KiB flushed as it fills: re-chunked, not held)
	// does not.
	bufferedShareTenths = 9
	// bufferedEventSpacing bounds the burst's mean time per event: the
	// events arrived at least 10,000 a second, several times faster than
	// the fastest hosted decoders stream (docs/telemetry.md, "Buffered
	// streams"), while a body held and then copied through a proxy
	// arrives within microseconds an event. This is what keeps a model that reasoned
	// unseen for a minute and then streamed its answer at a normal pace
	// from being flagged, however long its wait.
	bufferedEventSpacing = 100 * time.Microsecond
	// bufferedWaitRatio is how much longer than the burst the wait before
	// it must be, and bufferedMinSpan the least burst span the ratio is
	// taken of: the wait is at least ten times the burst and at least 10
	// ms. A stream that arrives in one read right after its request (a
	// replay, a test) was not held for long enough to matter.
	bufferedWaitRatio = 10
	bufferedMinSpan   = time.Millisecond
)

// outputBurst follows the stream's final burst of output events as they
// arrive, in constant memory: the events after the longest wait between
// output events, the first wait being the one from the request's arrival
// to the first output event (time to first token). In a buffered stream
// that wait is the whole generation and the burst is the whole stream; in
// a stream that was not held, the longest wait is time to first token or a
// pause, and what follows it arrives at the pace the model decodes.
type outputBurst struct {
	wait   time.Duration // the wait before the burst's first event
	start  time.Duration // the burst's first event
	last   time.Duration // the last output event
	events int64         // output events in the burst
}

// add counts an output event that arrived at offset at. Events that share
// an arrival time (several in one read) are a gap of zero.
func (b *outputBurst) add(at time.Duration) {
	if gap := at - b.last; b.events == 0 || gap > b.wait {
		b.wait, b.start, b.events = gap, at, 0
	}
	b.events++
	b.last = at
}

// buffered applies the rule to a stream of outputEvents output events
// whose final burst is b. The stream arrived buffered when all of these
// hold:
//
//   - the burst holds at least bufferedMinEvents (16) output events, and
//     at least 9 in 10 of the stream's output events;
//   - the burst arrived at least 10,000 events a second: its span, from
//     its first event to its last, is at most bufferedEventSpacing (100
//     µs) per interval between its events;
//   - the wait before the burst is at least bufferedWaitRatio (10) times
//     the burst's span, and at least 10 ms.
//
// Whoever sees a stream only as it arrives cannot tell a held stream from
// one the proxy's own host read late: a host descheduled for the whole of
// a short, fast stream reads it in one go, and it is flagged, as it did
// reach the client in a burst. A held stream of fewer than 16 output
// events is not flagged, nor one spread over several reads slower than
// 10,000 events a second (a large body over a long, slow path).
func (b *outputBurst) buffered(outputEvents int64) bool {
	n := b.events
	if n < bufferedMinEvents || n*10 < outputEvents*bufferedShareTenths {
		return false
	}
	span := b.last - b.start
	if span > time.Duration(n-1)*bufferedEventSpacing {
		return false
	}
	return b.wait >= bufferedWaitRatio*max(span, bufferedMinSpan)
}
