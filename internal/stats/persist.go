package stats

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tokentap/tokentap/internal/drift"
	"github.com/tokentap/tokentap/internal/protofields"
)

// The history is the whole store written out, so that a restart does not
// empty the live stats: every row's key, every slice of every window still
// live, the in-flight halves and the row's slowdown detector. Slices are
// placed by their start in absolute time, so that a store of another
// origin puts them back where they belong.
//
// Layout: historyMagic, the version as a varint, the body, and the body's
// CRC-32 (IEEE, little endian) over everything before it, which a
// truncated or corrupted file fails. The body and each part are
// protobuf-style tagged fields (protowire): a reader skips the fields it
// does not know, and a part that gains a field (a count, a sketch) takes
// a new number in its own message below. A change a reader of this
// version would misread takes a new HistoryVersion.

// HistoryVersion is the version of the history's encoding. A reader
// refuses other versions.
const HistoryVersion = 1

// historyMagic opens every history file, so that another file given by
// mistake is told apart from a damaged one.
var historyMagic = []byte("tokentap.stats\n")

// Field numbers. Each message has its own numbers; a new field takes the
// next free one of its message.
const (
	// The body.
	fieldTakenAt = 1 // zigzag varint, Unix nanoseconds; first
	fieldRow     = 2 // row message, repeated

	// A row.
	fieldRowProvider = 1
	fieldRowModel    = 2
	fieldRowLabel    = 3 // label message, repeated, sorted by name
	fieldRowOverflow = 4
	fieldRowLast     = 5 // zigzag varint, Unix nanoseconds
	fieldRowSlice    = 6 // slice message, repeated
	fieldRowInflight = 7 // in-flight message, repeated
	fieldRowHealth   = 8 // drift.Detector's own encoding

	// A label.
	fieldLabelName  = 1
	fieldLabelValue = 2

	// A slice or an in-flight half.
	fieldSliceWindow = 1
	fieldSliceStart  = 2 // zigzag varint, Unix nanoseconds
	fieldSliceCounts = 3 // counts message
	fieldSliceSketch = 4 // sketch message, repeated
	fieldSliceBucket = 5 // bucket message, repeated (in-flight halves)

	// A metric's sketch.
	fieldSketchMetric = 1 // the metric's name, as in the Report
	fieldSketchProto  = 2 // sketches-go's DDSketch protobuf

	// An in-flight bucket.
	fieldBucketIndex    = 1
	fieldBucketRequests = 2
	fieldBucketSketch   = 3 // sketch message, repeated

	// Counts: one number per field of Counts.
	fieldCountsRequests      = 1
	fieldCountsErrors        = 2
	fieldCountsAborts        = 3
	fieldCountsEstimated     = 4
	fieldCountsCostUSD       = 5 // fixed64 double
	fieldCountsSLORequests   = 6
	fieldCountsSLOMet        = 7
	fieldCountsGoodputTokens = 8
	fieldCountsBuffered      = 9
	fieldCountsUsageVerified = 10
	fieldCountsUsageReported = 11
	fieldCountsUsageCounted  = 12
	fieldCountsUsageMismatch = 13
	fieldCountsThrottled     = 14
)

// A row's strata halves (strata.go) are written as in-flight halves are,
// under their own row field, each cell a bucket whose index is the cell.
const fieldRowStrata = 9 // strata half message, repeated

// countFields are Counts' integer fields with their numbers, the one list
// both writing and reading go by: a new count is one line here.
func countFields(c *Counts) [13]struct {
	num protowire.Number
	p   *int64
} {
	return [...]struct {
		num protowire.Number
		p   *int64
	}{
		{fieldCountsRequests, &c.Requests},
		{fieldCountsErrors, &c.Errors},
		{fieldCountsAborts, &c.Aborts},
		{fieldCountsEstimated, &c.Estimated},
		{fieldCountsSLORequests, &c.SLORequests},
		{fieldCountsSLOMet, &c.SLOMet},
		{fieldCountsGoodputTokens, &c.GoodputTokens},
		{fieldCountsBuffered, &c.Buffered},
		{fieldCountsUsageVerified, &c.UsageVerified},
		{fieldCountsUsageReported, &c.UsageReported},
		{fieldCountsUsageCounted, &c.UsageCounted},
		{fieldCountsUsageMismatch, &c.UsageMismatches},
		{fieldCountsThrottled, &c.Throttled},
	}
}

// MarshalHistory writes the store's history at now: every row with a
// slice still live at now. Each row is locked while it is written, so a
// request recording into it waits for that row only.
func (s *Store) MarshalHistory(now time.Time) ([]byte, error) {
	s.mu.RLock()
	rows := make([]*row, 0, s.nrows+1)
	for _, r := range s.rows {
		for ; r != nil; r = r.next {
			rows = append(rows, r)
		}
	}
	s.mu.RUnlock()
	rows = append(rows, s.overflow)

	b := append([]byte(nil), historyMagic...)
	b = protowire.AppendVarint(b, HistoryVersion)
	b = protofields.AppendVarint(b, fieldTakenAt, protowire.EncodeZigZag(now.UnixNano()))
	t := s.since(now)
	var err error
	var msg []byte
	for _, r := range rows {
		r.mu.Lock()
		msg, err = r.appendHistory(msg[:0], s, t)
		r.mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("row %s/%s: %v", r.key.Provider, r.key.Model, err)
		}
		if len(msg) > 0 {
			b = protofields.AppendBytes(b, fieldRow, msg)
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b)), nil
}

// appendHistory appends the row's message to b: nothing when no slice is
// live at now (nanoseconds since the origin). The caller holds r.mu.
func (r *row) appendHistory(b []byte, s *Store, now int64) ([]byte, error) {
	start := len(b)
	b = protofields.AppendString(b, fieldRowProvider, r.key.Provider)
	b = protofields.AppendString(b, fieldRowModel, r.key.Model)
	for _, l := range r.key.Labels {
		var m []byte
		m = protofields.AppendString(m, fieldLabelName, l.Name)
		m = protofields.AppendString(m, fieldLabelValue, l.Value)
		b = protofields.AppendBytes(b, fieldRowLabel, m)
	}
	if r.overflow {
		b = protofields.AppendVarint(b, fieldRowOverflow, 1)
	}
	b = protofields.AppendVarint(b, fieldRowLast, protowire.EncodeZigZag(s.absolute(r.last).UnixNano()))
	live := false
	var err error
	for w := range r.rings {
		info := &windows[w]
		cur := floorDiv(now, int64(info.slice))
		for i := range r.rings[w] {
			sl := &r.rings[w][i]
			if sl.epoch == noEpoch || sl.epoch > cur || sl.epoch <= cur-int64(info.count) {
				continue
			}
			live = true
			b = protowire.AppendTag(b, fieldRowSlice, protowire.BytesType)
			if b, err = appendMessage(b, func(m []byte) ([]byte, error) {
				return sl.appendHistory(m, Window(w), s.absolute(sl.epoch*int64(info.slice)))
			}); err != nil {
				return nil, err
			}
		}
		half := inflightHalf(Window(w))
		cur = floorDiv(now, half)
		for i := range r.inflight[w] {
			sl := &r.inflight[w][i]
			if sl.epoch == noEpoch || sl.epoch > cur || sl.epoch <= cur-inflightHalves {
				continue
			}
			b = protowire.AppendTag(b, fieldRowInflight, protowire.BytesType)
			if b, err = appendMessage(b, func(m []byte) ([]byte, error) {
				return sl.appendHistory(m, Window(w), s.absolute(sl.epoch*half))
			}); err != nil {
				return nil, err
			}
		}
		if sw := strataWindow[w]; sw >= 0 && r.strata != nil {
			for i := range r.strata.halves[sw] {
				sl := &r.strata.halves[sw][i]
				if sl.epoch == noEpoch || sl.epoch > cur || sl.epoch <= cur-inflightHalves {
					continue
				}
				b = protowire.AppendTag(b, fieldRowStrata, protowire.BytesType)
				if b, err = appendMessage(b, func(m []byte) ([]byte, error) {
					return sl.appendHistory(m, Window(w), s.absolute(sl.epoch*half))
				}); err != nil {
					return nil, err
				}
			}
		}
	}
	if !live {
		return b[:start], nil
	}
	if !r.overflow {
		b = protowire.AppendTag(b, fieldRowHealth, protowire.BytesType)
		if b, err = appendMessage(b, r.health.AppendBinary); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// absolute is the time t nanoseconds after the origin.
func (s *Store) absolute(t int64) time.Time { return s.origin.Add(time.Duration(t)) }

// appendHistory appends the slice's message: its window, its start, its
// counts and its sketches by metric name.
func (sl *slice) appendHistory(b []byte, w Window, start time.Time) ([]byte, error) {
	b = protofields.AppendVarint(b, fieldSliceWindow, uint64(w))
	b = protofields.AppendVarint(b, fieldSliceStart, protowire.EncodeZigZag(start.UnixNano()))
	b = protofields.AppendBytes(b, fieldSliceCounts, sl.counts.appendHistory(nil))
	var err error
	for m, sk := range sl.sketches {
		if b, err = appendSketch(b, fieldSliceSketch, Metric(m), sk); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// appendHistory appends the in-flight half's message: its window, its
// start and, per bucket with a request, the count and sketches.
func (sl *inflightSlice) appendHistory(b []byte, w Window, start time.Time) ([]byte, error) {
	return appendHalf(b, w, start, sl.requests[:], sl.sketches[:])
}

// appendHistory appends the strata half's message as an in-flight half's,
// each cell a bucket whose index is the cell.
func (sl *strataSlice) appendHistory(b []byte, w Window, start time.Time) ([]byte, error) {
	return appendHalf(b, w, start, sl.requests[:], sl.sketches[:])
}

// appendHalf appends a half's message: its window, its start and, per
// bucket with a request, the bucket's index, count and sketches.
func appendHalf(b []byte, w Window, start time.Time, requests []int64, sketches [][numInflightMetrics]*ddsketch.DDSketch) ([]byte, error) {
	b = protofields.AppendVarint(b, fieldSliceWindow, uint64(w))
	b = protofields.AppendVarint(b, fieldSliceStart, protowire.EncodeZigZag(start.UnixNano()))
	var err error
	for k := range requests {
		if requests[k] == 0 {
			continue
		}
		b = protowire.AppendTag(b, fieldSliceBucket, protowire.BytesType)
		if b, err = appendMessage(b, func(m []byte) ([]byte, error) {
			m = protofields.AppendVarint(m, fieldBucketIndex, uint64(k))
			m = protofields.AppendVarint(m, fieldBucketRequests, uint64(requests[k]))
			for i, sk := range sketches[k] {
				if m, err = appendSketch(m, fieldBucketSketch, inflightMetrics[i], sk); err != nil {
					return nil, err
				}
			}
			return m, nil
		}); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// appendHistory appends the counts' message: one field per count, zeros
// left out.
func (c *Counts) appendHistory(b []byte) []byte {
	for _, f := range countFields(c) {
		if *f.p != 0 {
			b = protofields.AppendVarint(b, f.num, uint64(*f.p))
		}
	}
	if c.CostUSD != 0 {
		b = protowire.AppendTag(b, fieldCountsCostUSD, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(c.CostUSD))
	}
	return b
}

// appendSketch appends a sketch message of metric m under field num;
// nothing for an empty sketch.
func appendSketch(b []byte, num protowire.Number, m Metric, sk *ddsketch.DDSketch) ([]byte, error) {
	if sk == nil || sk.IsEmpty() {
		return b, nil
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return appendMessage(b, func(msg []byte) ([]byte, error) {
		msg = protofields.AppendString(msg, fieldSketchMetric, m.String())
		msg = protowire.AppendTag(msg, fieldSketchProto, protowire.BytesType)
		return appendMessage(msg, func(p []byte) ([]byte, error) { return sketchProto(p, sk) })
	})
}

// appendMessage appends the length-prefixed message that f appends to
// its argument, writing the message in place after b.
func appendMessage(b []byte, f func([]byte) ([]byte, error)) ([]byte, error) {
	// The length prefix is written after the message, which is then moved
	// by the prefix's size: cheaper than encoding the message twice.
	start := len(b)
	m, err := f(b)
	if err != nil {
		return nil, err
	}
	n := len(m) - start
	size := protowire.SizeVarint(uint64(n))
	m = append(m, make([]byte, size)...)
	copy(m[start+size:], m[start:start+n])
	protowire.AppendVarint(m[start:start], uint64(n))
	return m, nil
}

// The longest encoding of each part, every field at its longest (a
// varint at 10 bytes, a length prefix at 5, every bin of a sketch), from
// which MaxHistorySize follows.
var (
	maxMetricName = func() int {
		n := 0
		for _, m := range metrics {
			n = max(n, len(m.name))
		}
		return n
	}()
	// maxSketchProto: the mapping (gamma, offset, interpolation), the
	// positive store's contiguous bins and offset, the empty negative
	// store and the zero count.
	maxSketchProto = func(bins int) int { return (2 + 9 + 9 + 11) + (1 + 5 + 1 + 5 + 8*bins + 11) + 2 + 9 }
	maxSketchMsg   = func(bins int) int { return 1 + 5 + 2 + maxMetricName + 1 + 5 + maxSketchProto(bins) }
	maxCountsMsg   = len(countFields(new(Counts)))*11 + 9
	maxSliceMsg    = 1 + 5 + 11 + 11 + 1 + 5 + maxCountsMsg + NumMetrics*maxSketchMsg(MaxBins)
	maxInflightMsg = 1 + 5 + 11 + 11 + numInflightBuckets*(1+5+11+11+numInflightMetrics*maxSketchMsg(inflightBins))
	maxStrataMsg   = 1 + 5 + 11 + 11 + numCells*(1+5+11+11+numInflightMetrics*maxSketchMsg(strataBins))
	maxKeyMsg      = 2*(1+5+MaxKeyString) + MaxLabels*(1+5+2*(1+5+MaxKeyString))
	maxRowMsg      = 1 + 5 + maxKeyMsg + 11 + 11 + totalSlices*maxSliceMsg +
		numWindows*inflightHalves*maxInflightMsg + numStrataWindows*inflightHalves*maxStrataMsg +
		1 + 5 + drift.MaxEncodedSize
)

// MaxHistorySize is the longest history a store of maxRows rows (0: the
// default) writes, whatever its traffic: maxRows rows and the overflow
// row, each with every slice of every window holding every metric's
// sketch at full size. A reader refuses a longer one.
func MaxHistorySize(maxRows int) int64 {
	if maxRows <= 0 {
		maxRows = DefaultMaxRows
	}
	return int64(len(historyMagic)+10+11) + int64(maxRows+1)*int64(maxRowMsg) + 4
}
