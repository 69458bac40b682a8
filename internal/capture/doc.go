// Package capture turns the content of LLM API exchanges into the
// OpenTelemetry GenAI semantic conventions' (v1.41.0) opt-in content
// attributes: gen_ai.system_instructions, gen_ai.input.messages and
// gen_ai.output.messages, each a JSON string that follows the conventions'
// JSON schemas (a list of parts, or of messages made of parts: text,
// reasoning, tool_call, tool_call_response, blob, uri, file).
//
// Input comes from the request body, read per API (Input). Output comes
// from the generated text as the meter's dialects hand it out, streamed or
// read from a whole body (Output, a meter.TextSink). Both are bounded:
// Output keeps at most its maximum size of text, and every attribute is
// truncated to the maximum size in bytes while staying valid JSON of the
// same shape: the longest contents are cut first, each cut marked with
// "…", and only when the shape alone does not fit are the oldest messages
// left out. Result.Truncated says when anything was cut.
//
// Nothing here knows Caddy or OpenTelemetry; the caddymodule decides when
// content is captured (never by default) and puts the results on spans.
package capture
