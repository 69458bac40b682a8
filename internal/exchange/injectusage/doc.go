// Package injectusage makes an OpenAI-style streaming chat request ask for
// usage, and takes back out of the response exactly what asking added, so
// that the counts are exact and the client still gets the bytes it would
// have got without the option.
//
// OpenAI and most OpenAI-compatible servers report usage in a stream only
// when the request sets stream_options.include_usage. [Rewrite] sets it by
// editing only those bytes of the body; a [Stripper] then removes from the
// response, event by event, the usage-only chunk (choices: [], usage: {...})
// and the "usage":null member that the server puts in every other chunk.
// Doing that means holding the request body until it has been read (capped)
// and the partial event at the end of each write: the one exception to
// "nothing buffered", which the inject_usage option's name announces.
//
// Events are delimited by [sse.Splitter], which reads line ends as the
// meter's decoder does (LF, CRLF, a bare CR, a CRLF split across writes), so
// the stripper edits the events the meter reads and cuts none in two.
//
// The package knows nothing of Caddy or OpenTelemetry: it changes bytes and
// says what it did, and its caller logs and measures.
package injectusage
