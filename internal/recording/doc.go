// Package recording keeps the shape of a team's real traffic so that it
// can be replayed against another model: one JSON line per finished
// exchange (when it arrived, where it went, how long its input and output
// were, what tokentap measured), never its content unless content capture
// is on. `tokentap load --replay` reads it back, and so do tools that
// replay the mooncake trace format, which Mooncake converts to and from.
//
// A Recorder is a sink (package sink): the request's goroutine hands it a
// line without waiting on the disk, and one goroutine per file writes. A
// recording that cannot keep up drops lines and counts them; traffic never
// waits for it.
package recording
