package stats

import "unsafe"

// The memory one row can hold, worst case, by part. Each figure is the Go
// allocation size (size class) on 64-bit platforms; TestMemoryBound checks
// the total against the heap.
const (
	// sliceSketchBytes: the bins (MaxBins float64s, allocated once at full
	// size), the DDSketch (64) and its two collapsing stores (80 each).
	sliceSketchBytes = MaxBins*8 + 64 + 2*80
	// inflightSketchBytes: an in-flight sketch, likewise with its
	// inflightBins bins.
	inflightSketchBytes = inflightBins*8 + 64 + 2*80
	// sliceBytes: a slice's epoch, counts and sketch pointers, which the
	// rings hold in one array per row.
	sliceBytes = int(unsafe.Sizeof(slice{}))
	// rowStructBytes: the row struct (its in-flight halves inline);
	// TestStructSizes checks it.
	rowStructBytes = 4096
	// rowBytes: the row itself, its map entry and its longest key
	// (MaxLabels labels, every string cut at MaxKeyString).
	rowBytes = rowStructBytes + 64 + (2+2*MaxLabels)*MaxKeyString + MaxLabels*32
	// inflightBytes: every in-flight sketch of every half of every window.
	inflightBytes = numWindows * inflightHalves * numInflightBuckets * numInflightMetrics * inflightSketchBytes
	// strataStructBytes: a row's strata struct (its cells' counts and
	// sketch pointers); TestStructSizes checks it.
	strataStructBytes = 6144
	// strataSketchBytes: a strata sketch, with its strataBins bins.
	strataSketchBytes = strataBins*8 + 64 + 2*80
	// strataBytes: the strata struct and every sketch of every cell of
	// every half of both strata windows.
	strataBytes = strataStructBytes + numStrataWindows*inflightHalves*numCells*numInflightMetrics*strataSketchBytes
)

// RowBound is the most memory one row holds: every slice of every window
// with every metric's sketch, every in-flight sketch, every strata cell's
// sketches, and the longest key.
var RowBound = int64(totalSlices*(sliceBytes+NumMetrics*sliceSketchBytes) + inflightBytes + strataBytes + rowBytes)

// MemoryBound is the most memory a Store with maxRows rows (0: the default)
// holds, whatever the traffic: maxRows rows and the overflow row, each at
// RowBound (docs/live-stats.md works it out for the defaults); a row that records
// steadily reaches its bound within a day (its longest ring), and an idle row's memory is
// reused by the next new key. Views (Aggregate) allocate on top of this,
// for the length of one query.
func MemoryBound(maxRows int) int64 {
	if maxRows <= 0 {
		maxRows = DefaultMaxRows
	}
	return int64(maxRows+1) * RowBound
}
