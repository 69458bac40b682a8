package sse

// DefaultMaxEventSize is the per-event buffering cap used when
// Decoder.MaxEventSize is zero. LLM stream events are a few hundred bytes to
// a few KiB (a large tool-call argument delta, a final usage block), so 1 MiB
// leaves ample headroom for legitimate traffic while bounding what one
// stream can make the proxy hold in memory.
const DefaultMaxEventSize = 1 << 20 // 1 MiB

// Event is one dispatched event.
//
// Its slices alias the Decoder's own buffers (or the caller's Write buffer)
// and are valid only during the OnEvent callback: handing out views instead of
// copies is what keeps the decoder allocation-free. Copy anything that must
// outlive the callback, and do not modify the slices.
type Event struct {
	// Type is the value of the last `event` field of this event. Empty means
	// the default type "message"; it is left empty rather than filled in so
	// that no bytes have to be produced for the common case.
	Type []byte
	// Data is the data buffer: every `data` line's value joined by '\n', the
	// final '\n' removed, exactly as an EventSource would deliver it.
	Data []byte
	// ID is the last-event-ID buffer. Per the spec it persists across events
	// until another `id` field changes it, so it is the ID a client would
	// send on reconnection after this event. An `id` value containing NUL is
	// ignored, as the spec requires.
	ID []byte
	// Retry is the value of a valid `retry` field (ASCII digits only) seen in
	// this event, else -1. Values too large for int64 saturate. It is
	// reported per event rather than as stream state because the proxy only
	// observes it; it does not reconnect.
	Retry int64
	// Unterminated is true only for an event dispatched by Close: data that
	// was pending at end of stream without the blank line that dispatches it.
	// The spec discards such data; a measuring proxy still wants to see it
	// (e.g. llama.cpp sends a final `data: [DONE]` with no blank line), so it
	// is dispatched but flagged, and strict consumers can drop it.
	Unterminated bool
}

// Stats are per-stream counters, kept so the meter can report on streams it
// could not fully account for (oversized events) and on pure overhead
// (keep-alive comments) without wrapping the decoder.
type Stats struct {
	Events    int64 // events dispatched (including an Unterminated one)
	Oversized int64 // events skipped for exceeding MaxEventSize
	Comments  int64 // comment lines (starting with ':'), e.g. keep-alives
	Bytes     int64 // bytes fed to Write, BOM included
}
