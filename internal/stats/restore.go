package stats

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/DataDog/sketches-go/ddsketch"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tokentap/tokentap/internal/protofields"
)

// The reasons a history is not restored, as HistoryError.Reason says them
// (and the caddymodule counts them).
const (
	// HistoryTooLarge: longer than MaxHistorySize for the store's row
	// cap.
	HistoryTooLarge = "too_large"
	// HistoryCorrupt: not a history, truncated, or a field out of range.
	HistoryCorrupt = "corrupt"
	// HistoryVersionMismatch: written by a tokentap of another
	// HistoryVersion.
	HistoryVersionMismatch = "version"
	// HistoryOld: taken longer ago than the longest window, so nothing in
	// it is still live.
	HistoryOld = "old"
)

// HistoryError is why RestoreHistory restored nothing.
type HistoryError struct {
	// Reason is one of HistoryTooLarge, HistoryCorrupt,
	// HistoryVersionMismatch and HistoryOld.
	Reason string
	Err    error
}

func (e *HistoryError) Error() string { return "stats history " + e.Reason + ": " + e.Err.Error() }
func (e *HistoryError) Unwrap() error { return e.Err }

func historyErr(reason string, format string, args ...any) error {
	return &HistoryError{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// longestWindow is the longest window's length: a history older than it
// holds nothing live.
var longestWindow = func() time.Duration {
	var d time.Duration
	for w := range numWindows {
		d = max(d, Window(w).Duration())
	}
	return d
}()

// RestoreHistory puts what MarshalHistory wrote back into the store, as
// of now: slices that now has left their window are dropped, the rest go
// to the slice of their start. A row of a key the store has merges into
// it (the store's detector is kept); a new key takes a free row with its
// detector; past MaxRows, rows merge into the overflow row. It returns
// the rows restored. The history is read whole before anything is
// changed: on error (a *HistoryError) the store is as it was. Reading
// allocates at most MemoryBound for the store's cap, whatever b holds.
func (s *Store) RestoreHistory(b []byte, now time.Time) (int, error) {
	if limit := MaxHistorySize(s.maxRows); int64(len(b)) > limit {
		return 0, historyErr(HistoryTooLarge, "%d bytes: a store of %d rows writes at most %d", len(b), s.maxRows, limit)
	}
	if !bytes.HasPrefix(b, historyMagic) {
		return 0, historyErr(HistoryCorrupt, "not a tokentap stats history")
	}
	v, n := protowire.ConsumeVarint(b[len(historyMagic):])
	if n < 0 {
		return 0, historyErr(HistoryCorrupt, "truncated")
	}
	if v != HistoryVersion {
		return 0, historyErr(HistoryVersionMismatch, "version %d: this tokentap reads version %d", v, HistoryVersion)
	}
	body := b[len(historyMagic)+n:]
	if len(body) < 4 || crc32.ChecksumIEEE(b[:len(b)-4]) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return 0, historyErr(HistoryCorrupt, "truncated or damaged: the checksum does not match")
	}
	body = body[:len(body)-4]

	st := staging{maxRows: s.maxRows, seen: map[string]bool{}}
	first := true
	var takenAt time.Time
	err := protofields.Each(body, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		if first {
			if num != fieldTakenAt || typ != protowire.VarintType {
				return historyErr(HistoryCorrupt, "no time taken")
			}
			first = false
			takenAt = time.Unix(0, protowire.DecodeZigZag(v))
			if age := now.Sub(takenAt); age >= longestWindow {
				return historyErr(HistoryOld, "taken %s ago, at %s: the longest window is %s", age.Round(time.Second), takenAt.UTC().Format(time.RFC3339), longestWindow)
			}
			return nil
		}
		if num != fieldRow || typ != protowire.BytesType {
			return nil
		}
		r, err := s.readRow(raw, now)
		if err == nil && r != nil {
			err = st.add(r)
		}
		if err != nil {
			return historyErr(HistoryCorrupt, "row %d: %v", st.n, err)
		}
		st.n++
		return nil
	})
	if err != nil {
		var he *HistoryError
		if errors.As(err, &he) {
			return 0, err
		}
		return 0, historyErr(HistoryCorrupt, "%v", err)
	}
	if first {
		return 0, historyErr(HistoryCorrupt, "empty")
	}
	if st.overflow != nil {
		st.rows = append(st.rows, st.overflow)
	}
	s.install(st.rows)
	return len(st.rows), nil
}

// staging holds the rows read so far, within the store's cap: past it,
// rows merge into the overflow row as they are read, so that reading
// holds at most the cap's rows.
type staging struct {
	maxRows  int
	rows     []*row
	overflow *row
	seen     map[string]bool
	// n counts the rows read.
	n int
}

// add stages r; a key given twice is an error.
func (st *staging) add(r *row) error {
	id := r.key.id(r.overflow)
	if st.seen[id] {
		return errors.New("given twice")
	}
	st.seen[id] = true
	if !r.overflow && len(st.rows) < st.maxRows {
		st.rows = append(st.rows, r)
		return nil
	}
	if st.overflow == nil {
		st.overflow = newRow(overflowKey, true)
	}
	st.overflow.merge(r)
	return nil
}

// install adds the restored rows to the store (RestoreHistory).
func (s *Store) install(staged []*row) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range staged {
		if r.overflow {
			s.overflow.mu.Lock()
			s.overflow.merge(r)
			s.overflow.mu.Unlock()
			continue
		}
		h := r.key.hash(s.seed)
		var have *row
		for c := s.rows[h]; c != nil && have == nil; c = c.next {
			if r.key.equal(&c.key) {
				have = c
			}
		}
		switch {
		case have != nil:
			have.mu.Lock()
			have.merge(r)
			have.mu.Unlock()
		case s.nrows < s.maxRows:
			r.next = s.rows[h]
			s.rows[h] = r
			s.nrows++
		default:
			s.overflow.mu.Lock()
			s.overflow.merge(r)
			s.overflow.mu.Unlock()
		}
	}
	// A full table looks for idle rows afresh.
	s.noIdleBefore.Store(0)
}

// merge adds o's slices to r's: a slice of the same start merges, a
// later one replaces r's, an earlier one is left out, as recording would
// have done. r keeps its detector. The caller holds r.mu.
func (r *row) merge(o *row) {
	r.last = max(r.last, o.last)
	for w := range r.rings {
		for i := range r.rings[w] {
			src, dst := &o.rings[w][i], &r.rings[w][i]
			if src.epoch == noEpoch || dst.epoch > src.epoch {
				continue
			}
			if dst.epoch < src.epoch {
				dst.reset(src.epoch)
			}
			dst.counts.add(src.counts)
			for m := range src.sketches {
				dst.sketches[m] = mergeBounded(dst.sketches[m], src.sketches[m], func() *ddsketch.DDSketch { return newSliceSketch(Metric(m)) })
			}
		}
		for i := range r.inflight[w] {
			src, dst := &o.inflight[w][i], &r.inflight[w][i]
			if src.epoch == noEpoch || dst.epoch > src.epoch {
				continue
			}
			if dst.epoch < src.epoch {
				dst.reset(src.epoch)
			}
			for k := range src.requests {
				dst.requests[k] += src.requests[k]
				for j, m := range inflightMetrics {
					dst.sketches[k][j] = mergeBounded(dst.sketches[k][j], src.sketches[k][j], func() *ddsketch.DDSketch { return newInflightSketch(m) })
				}
			}
		}
	}
	r.mergeStrataHalves(o)
}

// mergeStrataHalves adds o's strata halves to r's, as merge does slices.
// The caller holds r.mu.
func (r *row) mergeStrataHalves(o *row) {
	if o.strata == nil {
		return
	}
	if r.strata == nil {
		r.strata = newRowStrata()
	}
	for w := range r.strata.halves {
		for i := range r.strata.halves[w] {
			src, dst := &o.strata.halves[w][i], &r.strata.halves[w][i]
			if src.epoch == noEpoch || dst.epoch > src.epoch {
				continue
			}
			if dst.epoch < src.epoch {
				dst.reset(src.epoch)
			}
			for c := range src.requests {
				dst.requests[c] += src.requests[c]
				for j, m := range inflightMetrics {
					dst.sketches[c][j] = mergeBounded(dst.sketches[c][j], src.sketches[c][j], func() *ddsketch.DDSketch { return newStrataSketch(m) })
				}
			}
		}
	}
}

// mergeBounded merges from into into, making into with make when it is
// nil, and returns into. Both share a mapping, so merging cannot fail.
func mergeBounded(into, from *ddsketch.DDSketch, make func() *ddsketch.DDSketch) *ddsketch.DDSketch {
	if from == nil || from.IsEmpty() {
		return into
	}
	if into == nil {
		into = make()
	}
	_ = into.MergeWith(from)
	return into
}

// readRow reads a row's message into a new row of the store, its slices
// placed as of now; nil when none of them is live at now.
func (s *Store) readRow(b []byte, now time.Time) (*row, error) {
	var k Key
	var overflow bool
	var last int64
	var slices, halves, strata [][]byte
	var health []byte
	err := protofields.Each(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch {
		case typ == protowire.BytesType && num == fieldRowProvider:
			k.Provider = string(raw)
		case typ == protowire.BytesType && num == fieldRowModel:
			k.Model = string(raw)
		case typ == protowire.BytesType && num == fieldRowLabel:
			if len(k.Labels) == MaxLabels {
				return fmt.Errorf("more than %d labels", MaxLabels)
			}
			l, err := readLabel(raw)
			if err != nil {
				return err
			}
			k.Labels = append(k.Labels, l)
		case typ == protowire.VarintType && num == fieldRowOverflow:
			overflow = v != 0
		case typ == protowire.VarintType && num == fieldRowLast:
			last = protowire.DecodeZigZag(v)
		case typ == protowire.BytesType && num == fieldRowSlice:
			if len(slices) == totalSlices {
				return fmt.Errorf("more than %d slices", totalSlices)
			}
			slices = append(slices, raw)
		case typ == protowire.BytesType && num == fieldRowInflight:
			if len(halves) == numWindows*inflightHalves {
				return fmt.Errorf("more than %d in-flight halves", numWindows*inflightHalves)
			}
			halves = append(halves, raw)
		case typ == protowire.BytesType && num == fieldRowStrata:
			if len(strata) == numStrataWindows*inflightHalves {
				return fmt.Errorf("more than %d strata halves", numStrataWindows*inflightHalves)
			}
			strata = append(strata, raw)
		case typ == protowire.BytesType && num == fieldRowHealth:
			health = raw
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	k.normalize()
	var r *row
	if overflow {
		r = newRow(overflowKey, true)
	} else {
		r = newRow(k.stored(), false)
		if health != nil {
			if err := r.health.UnmarshalBinary(health); err != nil {
				return nil, fmt.Errorf("%s/%s, detector: %v", k.Provider, k.Model, err)
			}
		}
	}
	t := s.since(now)
	r.last = min(s.since(time.Unix(0, last)), t)
	live := false
	for i, m := range slices {
		ok, err := r.readSlice(m, s, t)
		if err != nil {
			return nil, fmt.Errorf("%s/%s, slice %d: %v", k.Provider, k.Model, i, err)
		}
		live = live || ok
	}
	if !live {
		return nil, nil
	}
	for i, m := range halves {
		if err := r.readInflight(m, s, t); err != nil {
			return nil, fmt.Errorf("%s/%s, in-flight half %d: %v", k.Provider, k.Model, i, err)
		}
	}
	for i, m := range strata {
		if err := r.readStrata(m, s, t); err != nil {
			return nil, fmt.Errorf("%s/%s, strata half %d: %v", k.Provider, k.Model, i, err)
		}
	}
	return r, nil
}

func readLabel(b []byte) (Label, error) {
	var l Label
	err := protofields.Each(b, func(num protowire.Number, typ protowire.Type, _ uint64, raw []byte) error {
		if typ == protowire.BytesType {
			switch num {
			case fieldLabelName:
				l.Name = string(raw)
			case fieldLabelValue:
				l.Value = string(raw)
			}
		}
		return nil
	})
	return l, err
}

// slicePlace reads a slice's or half's window and start and returns its
// window and its epoch in that ring of slices of length, with whether it
// is live at now (nanoseconds since the origin); the rest of its fields
// go to rest.
func slicePlace(b []byte, s *Store, length func(Window) int64, count func(Window) int, now int64,
	rest func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error) (w Window, e int64, live bool, err error) {
	var haveW, haveStart bool
	var start int64
	err = protofields.Each(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch {
		case typ == protowire.VarintType && num == fieldSliceWindow:
			if v >= uint64(numWindows) {
				return fmt.Errorf("window %d", v)
			}
			w, haveW = Window(v), true
		case typ == protowire.VarintType && num == fieldSliceStart:
			start, haveStart = protowire.DecodeZigZag(v), true
		default:
			return rest(num, typ, v, raw)
		}
		return nil
	})
	if err == nil && (!haveW || !haveStart) {
		err = errors.New("no window or start")
	}
	if err != nil {
		return 0, 0, false, err
	}
	e = floorDiv(s.since(time.Unix(0, start)), length(w))
	cur := floorDiv(now, length(w))
	return w, e, e <= cur && e > cur-int64(count(w)), nil
}

// readSlice reads a slice's message into its place in r's ring, if it is
// live at now; it reports whether it was.
func (r *row) readSlice(b []byte, s *Store, now int64) (bool, error) {
	var counts Counts
	var sketches [NumMetrics][]byte
	w, e, live, err := slicePlace(b, s,
		func(w Window) int64 { return int64(windows[w].slice) },
		func(w Window) int { return windows[w].count }, now,
		func(num protowire.Number, typ protowire.Type, _ uint64, raw []byte) error {
			switch {
			case typ == protowire.BytesType && num == fieldSliceCounts:
				return counts.readHistory(raw)
			case typ == protowire.BytesType && num == fieldSliceSketch:
				return readSketchMsg(raw, sketches[:], func(m Metric) (int, bool) { return int(m), true })
			}
			return nil
		})
	if err != nil || !live {
		return false, err
	}
	sl := &r.rings[w][mod(e, windows[w].count)]
	if sl.epoch != noEpoch {
		return false, fmt.Errorf("window %s: two slices at %d", w, e)
	}
	sl.epoch, sl.counts = e, counts
	for m, raw := range sketches {
		if raw == nil {
			continue
		}
		if sl.sketches[m], err = decodeSketchProto(raw, &sliceSketches, func() *ddsketch.DDSketch { return newSliceSketch(Metric(m)) }); err != nil {
			return false, fmt.Errorf("%s: %v", Metric(m), err)
		}
	}
	return true, nil
}

// readInflight reads an in-flight half's message into its place in r's
// ring, if it is live at now.
func (r *row) readInflight(b []byte, s *Store, now int64) error {
	w, e, buckets, err := readHalf(b, s, now, numInflightBuckets)
	if err != nil || buckets == nil {
		return err
	}
	sl := &r.inflight[w][mod(e, inflightHalves)]
	if sl.epoch != noEpoch {
		return fmt.Errorf("window %s: two halves at %d", w, e)
	}
	sl.epoch = e
	for k, raw := range buckets {
		if raw != nil {
			if err := readBucket(raw, &sl.requests[k], &sl.sketches[k], &inflightSketches, newInflightSketch); err != nil {
				return fmt.Errorf("bucket %d: %v", k, err)
			}
		}
	}
	return nil
}

// readStrata reads a strata half's message into its place in r's strata,
// if it is live at now; a window that keeps no strata is refused.
func (r *row) readStrata(b []byte, s *Store, now int64) error {
	w, e, cells, err := readHalf(b, s, now, numCells)
	if err != nil || cells == nil {
		return err
	}
	sw := strataWindow[w]
	if sw < 0 {
		return fmt.Errorf("window %s keeps no strata", w)
	}
	if r.strata == nil {
		r.strata = newRowStrata()
	}
	sl := &r.strata.halves[sw][mod(e, inflightHalves)]
	if sl.epoch != noEpoch {
		return fmt.Errorf("window %s: two strata halves at %d", w, e)
	}
	sl.epoch = e
	for c, raw := range cells {
		if raw != nil {
			if err := readBucket(raw, &sl.requests[c], &sl.sketches[c], &strataSketches, newStrataSketch); err != nil {
				return fmt.Errorf("cell %d: %v", c, err)
			}
		}
	}
	return nil
}

// readHalf reads an in-flight or strata half's place and its buckets'
// messages by index, each below n and given once; buckets is nil when the
// half is not live at now.
func readHalf(b []byte, s *Store, now int64, n int) (w Window, e int64, buckets [][]byte, err error) {
	byIndex := make([][]byte, n)
	w, e, live, err := slicePlace(b, s, inflightHalf,
		func(Window) int { return inflightHalves }, now,
		func(num protowire.Number, typ protowire.Type, _ uint64, raw []byte) error {
			if typ != protowire.BytesType || num != fieldSliceBucket {
				return nil
			}
			k := uint64(n)
			if err := protofields.Each(raw, func(num protowire.Number, typ protowire.Type, v uint64, _ []byte) error {
				if num == fieldBucketIndex && typ == protowire.VarintType {
					k = v
				}
				return nil
			}); err != nil {
				return err
			}
			if k >= uint64(n) {
				return fmt.Errorf("bucket %d of %d", k, n)
			}
			if byIndex[k] != nil {
				return fmt.Errorf("bucket %d given twice", k)
			}
			byIndex[k] = raw
			return nil
		})
	if err != nil || !live {
		return w, e, nil, err
	}
	return w, e, byIndex, nil
}

// readBucket reads a bucket's count and its sketches of the in-flight
// metrics, of kind, into requests and sketches.
func readBucket(b []byte, requests *int64, sketches *[numInflightMetrics]*ddsketch.DDSketch, kind *sketchKind, newSketch func(Metric) *ddsketch.DDSketch) error {
	var raws [numInflightMetrics][]byte
	err := protofields.Each(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch {
		case typ == protowire.VarintType && num == fieldBucketRequests:
			if v > math.MaxInt64 {
				return errors.New("negative count")
			}
			*requests = int64(v)
		case typ == protowire.BytesType && num == fieldBucketSketch:
			return readSketchMsg(raw, raws[:], func(m Metric) (int, bool) {
				for i, im := range inflightMetrics {
					if im == m {
						return i, true
					}
				}
				return 0, false
			})
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, raw := range raws {
		if raw == nil {
			continue
		}
		m := inflightMetrics[i]
		if sketches[i], err = decodeSketchProto(raw, kind, func() *ddsketch.DDSketch { return newSketch(m) }); err != nil {
			return fmt.Errorf("%s: %v", m, err)
		}
	}
	return nil
}

// readSketchMsg reads a sketch message into into at the place that index
// gives its metric; a metric this version does not know, or one the part
// does not keep, is skipped, so that a later version's history still
// reads.
func readSketchMsg(b []byte, into [][]byte, index func(Metric) (int, bool)) error {
	var name string
	var proto []byte
	err := protofields.Each(b, func(num protowire.Number, typ protowire.Type, _ uint64, raw []byte) error {
		if typ == protowire.BytesType {
			switch num {
			case fieldSketchMetric:
				name = string(raw)
			case fieldSketchProto:
				proto = raw
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	m, ok := LookupMetric(name)
	if !ok || m.String() != name {
		return nil
	}
	i, ok := index(m)
	if !ok {
		return nil
	}
	if into[i] != nil {
		return fmt.Errorf("%s given twice", name)
	}
	if proto == nil {
		proto = []byte{}
	}
	into[i] = proto
	return nil
}

// readHistory reads the counts' message, with the checks of a snapshot's
// counts; fields it does not know are skipped.
func (c *Counts) readHistory(b []byte) error {
	var r Counts
	err := protofields.Each(b, func(num protowire.Number, typ protowire.Type, v uint64, _ []byte) error {
		if typ == protowire.Fixed64Type && num == fieldCountsCostUSD {
			r.CostUSD = math.Float64frombits(v)
			return nil
		}
		if typ != protowire.VarintType {
			return nil
		}
		for _, f := range countFields(&r) {
			if f.num == num {
				*f.p = int64(v)
				break
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	sc := snapshotCounts(&r)
	if *c, err = sc.counts(); err != nil {
		return err
	}
	return nil
}

// Empty reports whether the store holds nothing: no row, and no slice in
// the overflow row.
func (s *Store) Empty() bool {
	s.mu.RLock()
	n := s.nrows
	s.mu.RUnlock()
	if n > 0 {
		return false
	}
	s.overflow.mu.Lock()
	defer s.overflow.mu.Unlock()
	for w := range s.overflow.rings {
		for i := range s.overflow.rings[w] {
			if s.overflow.rings[w][i].epoch != noEpoch {
				return false
			}
		}
	}
	return true
}
