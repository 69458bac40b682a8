// Package ratelimit reads how close a caller is to its provider's rate
// limits from a response's headers: per limit kind (requests, tokens,
// input tokens, output tokens) the limit, what remains of it and when it
// resets, and on a throttled answer how long to wait (retry-after).
//
// Providers send these headers on every response, so tokentap reads them
// on every response: a few map lookups by canonical key when none is
// present, and no allocation when they are. It reads only the headers
// named in providers.go; it never reads, keeps or records any other
// header, and in particular none that carries a key (Authorization,
// x-api-key, api-key), which are request headers anyway.
//
// Which provider sends what, with the documentation each rule is read
// from (also tabled in docs/telemetry.md):
//
//   - OpenAI: x-ratelimit-{limit,remaining,reset}-{requests,tokens}; the
//     reset is a Go-style duration ("1s", "6m0s", "20ms") until the limit
//     is back to its initial state.
//     source: https://platform.openai.com/docs/guides/rate-limits (rate
//     limits in headers)
//   - Azure OpenAI: the same names (some deployments send only the
//     remaining ones, or -1 for a limit it does not report, which reads as
//     not known); a reset of a bare number is seconds. A 429 may carry
//     retry-after-ms, in milliseconds, which the official OpenAI SDKs read
//     before retry-after.
//     source: https://learn.microsoft.com/en-us/answers/questions/5625878/azure-openai-responses-api-x-ratelimit-headers-val
//     source: https://github.com/openai/openai-python (src/openai/_base_client.py, _parse_retry_after_header)
//   - Anthropic: anthropic-ratelimit-{requests,tokens,input-tokens,
//     output-tokens}-{limit,remaining,reset}; the reset is an RFC 3339
//     time, read against the response's arrival. The token counts are
//     rounded by the provider.
//     source: https://docs.anthropic.com/en/api/rate-limits (response headers)
//     source: https://docs.aws.amazon.com/claude-platform/latest/userguide/rate-limits.html
//   - Groq: OpenAI's names, with its own windows: the requests limit is
//     per day (RPD), the tokens limit per minute (TPM), so a Groq row's
//     requests share is of the day's quota.
//     source: https://console.groq.com/docs/rate-limits
//   - retry-after (seconds or an HTTP date, RFC 9110 section 10.2.3) and
//     retry-after-ms, read on the statuses that ask a client to wait: 429,
//     503 and Anthropic's 529 (overloaded).
//     source: https://www.rfc-editor.org/rfc/rfc9110#field.retry-after
//
// Mistral is not read: its documentation, as far as it could be found,
// names no rate limit response headers, and the names clients use for it
// (x-ratelimitbysize-*) could not be confirmed from Mistral itself.
package ratelimit
