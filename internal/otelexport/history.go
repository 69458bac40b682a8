package otelexport

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The live stats history's counters (Prometheus: tokentap_stats_restore_total,
// tokentap_stats_save_total): what became of the restore at start, by
// result, and of each save, so that an alert can tell a tokentap that
// starts without its history, or cannot write it, from one that has it.
// They count for the whole process, whichever MeterProvider reads them.
const (
	metricStatsRestore = "tokentap.stats.restore"
	metricStatsSave    = "tokentap.stats.save"
	// attrHistoryResult is the counters' one attribute.
	attrHistoryResult = attribute.Key("tokentap.stats.history.result")
)

// The results of a restore: HistoryRestored, or why nothing was; and of a
// save: HistorySaved or HistorySaveFailed.
const (
	HistoryRestored   = "restored"
	HistoryMissing    = "missing"
	HistoryOld        = "old"
	HistoryCorrupt    = "corrupt"
	HistoryVersion    = "version"
	HistoryTooLarge   = "too_large"
	HistoryReadFailed = "read_failed"
	HistorySaved      = "saved"
	HistorySaveFailed = "failed"
)

var (
	restoreResults = [...]string{HistoryRestored, HistoryMissing, HistoryOld, HistoryCorrupt, HistoryVersion, HistoryTooLarge, HistoryReadFailed}
	saveResults    = [...]string{HistorySaved, HistorySaveFailed}
	restoreCounts  [len(restoreResults)]atomic.Int64
	saveCounts     [len(saveResults)]atomic.Int64
)

// CountHistoryRestore counts a restore's result, one of the restore
// results above; others are not counted.
func CountHistoryRestore(result string) { count(restoreResults[:], restoreCounts[:], result) }

// CountHistorySave counts a save's result: HistorySaved or
// HistorySaveFailed.
func CountHistorySave(result string) { count(saveResults[:], saveCounts[:], result) }

func count(results []string, counts []atomic.Int64, result string) {
	for i, r := range results {
		if r == result {
			counts[i].Add(1)
		}
	}
}

// newHistoryInstruments creates the two counters, observed from the
// process's counts at each collection.
func newHistoryInstruments(m metric.Meter) error {
	observe := func(results []string, counts []atomic.Int64) metric.Int64Callback {
		return func(_ context.Context, o metric.Int64Observer) error {
			for i, r := range results {
				if n := counts[i].Load(); n > 0 {
					o.Observe(n, metric.WithAttributes(attrHistoryResult.String(r)))
				}
			}
			return nil
		}
	}
	_, err := m.Int64ObservableCounter(metricStatsRestore,
		metric.WithUnit("{restore}"),
		metric.WithDescription("Restores of the live stats' history at start, by tokentap.stats.history.result: restored, or why tokentap started fresh (missing, old, corrupt, version, too_large, read_failed)."),
		metric.WithInt64Callback(observe(restoreResults[:], restoreCounts[:])))
	if err != nil {
		return err
	}
	_, err = m.Int64ObservableCounter(metricStatsSave,
		metric.WithUnit("{save}"),
		metric.WithDescription("Saves of the live stats' history, periodic and at stop, by tokentap.stats.history.result: saved or failed."),
		metric.WithInt64Callback(observe(saveResults[:], saveCounts[:])))
	return err
}

// HistoryCount is how many restores or saves had result so far in this
// process, for tests and diagnostics.
func HistoryCount(result string) int64 {
	for i, r := range restoreResults {
		if r == result {
			return restoreCounts[i].Load()
		}
	}
	for i, r := range saveResults {
		if r == result {
			return saveCounts[i].Load()
		}
	}
	return 0
}
