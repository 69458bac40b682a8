// Package splitfeed cuts a byte stream into the writes a proxy might hand a
// streaming decoder (at given offsets, at every single offset, byte by
// byte, in fixed sizes, at random) and feeds them to one. The framing
// packages (sse, ndjson, jsonarray, eventstream) promise the same result
// however a stream is split, and their tests check that promise with these
// helpers rather than each with its own copies.
package splitfeed
