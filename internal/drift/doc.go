// Package drift tells whether a row (provider, model, labels) has become
// slow compared with its own earlier requests: its output tokens/s fell,
// or its time to first token rose, by a configured share (Config.RateDrop,
// 30 %, and Config.TTFTRise, 50 %). The stats store calls a row's
// Detector once per finished request, under the row's lock, and serves
// its Health: insufficient_data, ok or slow, since when, why, and the p50
// of the baseline and of the latest requests.
//
// It counts requests, not minutes: a busy row and a quiet one are judged
// on the same evidence, and the delays it promises (docs/drift.md
// measures them) are in requests. Like package stats it knows nothing of
// Caddy or OpenTelemetry, and it uses only the standard library.
//
// # Method
//
// Each signal is watched on its own, in log space, where a fall of 30 %
// is the same distance (delta = -ln 0.7) for a row at 20 tokens/s and
// one at 200, and multiplicative jitter is additive noise.
//
// The baseline is the median of a window of earlier requests (128), with
// a spread σ taken from their mean absolute deviation. The latest
// requests (32) are held back from it, so that the start of a slowdown
// is judged against the requests before it rather than leaking into its
// own reference. While a signal is slow its baseline is frozen, so that
// an incident does not become the new normal, and when it clears the
// requests of the incident's end are dropped rather than admitted.
// Outside incidents the baseline follows the row, so a slow drift (a
// model whose speed changes by a few percent over a day) is absorbed
// rather than flagged; so is a change that goes unflagged for about 100
// requests (Lag plus half the baseline), once it is the baseline's
// median.
//
// Each request is then evidence. The test is a CUSUM (Page's cumulative
// sum) of per-request log-likelihood ratios under a normal model with the
// baseline's spread: "the signal is delta off its baseline" against "it
// is a tolerance a off", a being a tenth of delta, or twice the standard
// error of the baseline's median (1.25·σ/sqrt(n)) if that is more, since
// a jittery row's baseline is itself uncertain. A request d worse than
// the baseline's median adds (delta-a)/σ² · (d - (delta+a)/2): the line
// is a little over halfway to the threshold, a fall of about 18 % for
// 30 %. The sum is kept at or above zero, and when it reaches
// Config.Evidence nats the signal is slow. Clearing is the mirror test,
// "a off" against "still 0.85·delta off", whose line is below the
// flagging one: a signal that settles between the two keeps its state
// instead of flapping. One request moves either sum by at most
// Evidence/MinRun, so no single wild request (a cold cache, a retry)
// decides anything.
//
// Why this test:
//
//   - A CUSUM is the quickest test for a step change of a known size at
//     a given false-alarm rate (Lorden; Moustakides), and one number,
//     Evidence, sets its false alarms: under its model a CUSUM that needs
//     h nats raises one at most once in e^h requests on average.
//   - The window-median rule (the median of the last k requests against
//     the baseline, confirmed k times) forgets everything outside its
//     window, so it buys a false-alarm rate with a later flag; measured
//     on the same rows (TestCompareWindowMedian), no window was both
//     quicker and quieter than the CUSUM.
//   - Scaling by the baseline's own spread, and widening the tolerance by
//     its error, keeps a jittery row's false alarms about as rare as a
//     steady row's; the jittery row pays with a later flag. A row whose
//     requests vary by more than its threshold cannot be judged within
//     tens of requests by any test, and is not pretended to be.
//   - The baseline is a median, robust to outliers, and its spread a mean
//     absolute deviation: a row whose values mostly repeat (a quantized
//     timer, a cache) has a median absolute deviation of 0, which would
//     give every small departure a huge weight.
//   - Sketches (package stats) summarise time slices, so a test on them
//     would work in minutes; the raw ln values of the requests a test
//     needs fit in StateBytes.
//
// # States
//
// A signal is judged once its baseline holds Config.MinBaseline requests,
// which takes Lag + MinBaseline (96) requests carrying it. The row is
// slow if either signal is slow, ok if at least one is judged and none is
// slow, and insufficient_data until then. A row whose requests carry
// neither signal (not streamed) stays insufficient_data. A thin row waits
// for its 96 requests however long they take, and then compares each
// request with its own earlier ones however old those are: Health.Since
// says how long ago the state began. A slowdown that begins before the
// baseline is complete becomes part of it. A signal that stays slow stays
// flagged until it recovers or the row's detector is reset
// (Detector.Init): the baseline is never replaced by the incident.
//
// Values that are not a possible rate or time (NaN, infinities, zero,
// negatives, outside [1e-9, 1e12]) are measurement faults: ignored, and
// counted by Detector.Ignored.
package drift
