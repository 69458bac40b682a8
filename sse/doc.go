// Package sse decodes text/event-stream (Server-Sent Events) bodies as they
// stream through tokentap, so the meter can see each LLM event without
// slowing down or altering what the client receives.
//
// # Push, not pull
//
// A reverse proxy already owns the read loop: the upstream body is copied to
// the client one Write at a time, and the ResponseWriter wrapper sees those
// writes. A pull-style parser (bufio.Scanner, an io.Reader wrapper) would need
// its own goroutine or a second copy of the body. [Decoder] is instead an
// io.Writer-shaped sink: the wrapper forwards each chunk to the client and
// then hands the same bytes to Decoder.Write, which calls OnEvent for every
// event the chunk completes. Chunks may split events, lines, CRLF pairs and
// even the byte-order mark at any byte; the decoder carries the minimum state
// across writes (a partial line, the event being built, a "skip the next LF"
// bit, a partially matched BOM).
//
// # Zero allocation on the hot path
//
// Every proxied stream goes through the decoder, so it must cost close to a
// memchr over the bytes. Lines are found with bytes.IndexByte, each byte is
// scanned once (never rescanning a buffered partial line), and all state
// lives in a few byte slices owned by the Decoder and reused across events and,
// after Reset, across streams. When an event's single data line and its
// blank line both arrive in one Write, Event.Data aliases the caller's buffer
// and nothing is copied at all. The price is that an [Event] and its slices
// are only valid during the OnEvent callback; a consumer that keeps anything
// must copy it. The decoder never keeps a reference to a Write buffer after
// Write returns, because the proxy reuses that buffer for the next chunk.
//
// # Exactness, and leniency at end of stream
//
// Within a stream the decoder follows the WHATWG HTML "Server-sent events"
// parsing rules exactly (line ends, BOM, comments, field parsing, the
// last-event-ID buffer, retry, dispatch on blank line), at the byte level:
// bytes are not UTF-8-decoded, so an invalid sequence reaches OnEvent as sent
// rather than as U+FFFD, which would cost a copy and hide what the upstream
// really sent. The one place it is deliberately more lenient is end of
// stream: the spec discards an event
// that was not ended by a blank line, and even a final line without a line
// end, but real servers (llama.cpp's final "data: [DONE]", truncated
// upstreams) do end that way, and a meter wants to see what was actually
// sent. [Decoder.Close] therefore treats a pending partial line as a line and
// dispatches any pending data with Event.Unterminated set, so callers that
// want strict behaviour can simply ignore those events.
//
// # Oversized events
//
// A misbehaving or hostile upstream could send an endless event, or a single
// line of gigabytes, and a decoder that buffered it would take the proxy down
// with it. The bytes one event may hold (the sum of its field lines, comments
// excluded) are capped by Decoder.MaxEventSize. An event that crosses the cap
// is dropped as a whole (no partial event is ever reported, since a truncated
// JSON chunk would only mislead the meter), counted in Stats.Oversized, and
// the decoder discards input until the blank line that ends it, then resumes
// normally. Nothing beyond the cap is ever buffered, not even a single long
// line. Comment lines are never buffered at all: only their first byte is
// needed to know they are comments.
//
// # Blocking and failure
//
// Write never blocks (apart from the callback it runs), never fails and always
// consumes all of its input: whatever bytes arrive, the client must still get
// them, and a decoder that could return an error would tempt a caller to
// abort the stream over a metering problem.
package sse
