// Package stats keeps the live model comparison of one tokentap instance:
// per (provider, model, labels) row, sliding windows of 1 minute, 5 minutes
// and 1 hour of mergeable quantile sketches (DDSketch, from
// github.com/DataDog/sketches-go) of time to first token, time to first
// visible token, output tokens/s, time per output token, duration and input
// and output tokens, with request, error, abort and estimated-usage counts.
//
// It answers "which model is faster for us, at the median and at the tail,
// right now", which spans and metric backends answer only after a round
// trip through a collector. Like package meter it knows nothing of Caddy or
// OpenTelemetry.
//
// # Windows
//
// Each window is a ring of time slices: 1m is 6 slices of 10 s, 5m is 10 of
// 30 s, 1h is 12 of 5 min. A request is recorded once in each ring, in the
// slice its end falls in; a view of a window merges the slices of the ring
// that are not older than the window, so it covers between (window - slice)
// and window of history: at most 10 s, 30 s or 5 min of the oldest data has
// already left the view (the staleness the design trades for bounded memory).
//
// # Accuracy
//
// Every sketch uses a logarithmic index mapping of 1 % relative accuracy
// (RelativeAccuracy): a reported quantile is within 1 % of the value of the
// request at that rank. Each slice's sketch keeps at most MaxBins (256)
// bins, which covers values within one slice that span gamma^255 at full
// accuracy (docs/live-stats.md gives the figure); beyond that the store collapses its least useful end (the
// lowest values for latencies and token counts, whose high tail matters;
// the highest for output tokens/s, whose slow tail matters).
//
// # Memory
//
// Rows are capped (Options.MaxRows, default 256); further keys share one
// overflow row whose provider and model are "_other", and a row idle for a
// whole hour is reused for a new key. Each slice's sketch is sized to
// MaxBins when first used and reused afterwards, so recording into an
// existing row allocates nothing, and the memory is bounded by MemoryBound
// whatever the traffic.
//
// # Merging
//
// A window's state (Aggregate) is exported as a versioned Snapshot with each
// sketch in sketches-go's protobuf form. Snapshots of several instances
// merge exactly (DDSketch merges bin by bin), so the merged view equals the
// view of one instance that saw all the traffic; percentiles are never
// averaged.
package stats
