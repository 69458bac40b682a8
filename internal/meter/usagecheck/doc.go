// Package usagecheck checks a provider's reported output token count
// against the output it streamed, counted with the model's own tokenizer
// (verify_usage). A provider whose count drifts from what it sent (a
// billing bug, a proxy rewriting usage, a model served with another
// tokenizer) shows as a ratio away from 1 and as mismatches.
//
// A Checker is one sampled exchange's meter.TextSink: it counts the answer
// text the dialects hand out, and notes the output it cannot count (tool
// calls, shown reasoning). Exchanges that are not sampled get no Checker,
// so with verify_usage off the meter does no work for it.
package usagecheck
