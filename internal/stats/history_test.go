package stats

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tokentap/tokentap/internal/drift"
	"github.com/tokentap/tokentap/internal/protofields"
)

// historyEnd is the instant the populated store is written at.
var historyEnd = 2*time.Hour + 17*time.Second

// populated returns a store with every part of a row in use: rows with and
// without labels, the overflow row (a cap of 3 and 4 keys), every window
// (requests over two hours, the last ones within the minute), in-flight
// levels, errors, aborts, estimates, cost and SLO counts, detectors with
// a baseline, and one row whose detector turned slow.
func populated(t testing.TB) *Store {
	t.Helper()
	s := newTestStore(3)
	keys := []Key{
		key("openai", "gpt-a", "team", "x"),
		key("anthropic", "claude-b"),
		key("openai", "gpt-c", "team", "y", "env", "prod"),
		key("ollama", "llama-d"), // past the cap: the overflow row
	}
	cfg := drift.Config{Baseline: 16, MinBaseline: 8, Lag: 4, Current: 2, MinRun: 1, Evidence: 2}
	n := 0
	for d := time.Duration(0); d <= historyEnd; d += 7 * time.Second {
		for i, k := range keys {
			smp := full(1 + float64((n*7+i*3)%41))
			rate := 50 + float64(n%5)
			if i == 0 && d > historyEnd-10*time.Minute {
				rate = 5 // gpt-a slows down for its last ten minutes
			}
			smp.Set(OutputTokensPerSecond, rate)
			smp.Set(Cost, 0.001*float64(1+n%3))
			smp.Inflight = int64(1 + (n+i)%70)
			smp.Error, smp.Abort, smp.Estimated = n%11 == 0, n%13 == 0, n%5 == 0
			smp.SLOJudged, smp.SLOMet = n%2 == 0, n%4 == 0
			smp.Buffered = n%7 == 0
			smp.Throttled = n%17 == 0 && !smp.Error
			if n%3 == 0 {
				smp.UsageVerified, smp.UsageMismatch = true, n%9 == 0
				smp.UsageReported, smp.UsageCounted = int64(100+n%17), int64(100+n%13)
			}
			smp.Drift = &cfg
			record(s, k, smp, d)
			n++
		}
	}
	if st := healthOf(s, "openai", "gpt-a"); st != drift.Slow {
		t.Fatalf("gpt-a is %s, want slow: the fixture needs a slow row", st)
	}
	if st := healthOf(s, "anthropic", "claude-b"); st != drift.OK {
		t.Fatalf("claude-b is %s, want ok: the fixture needs a baseline", st)
	}
	return s
}

func healthOf(s *Store, provider, model string) drift.State {
	st := drift.State(255)
	s.EachHealth(func(k Key, h drift.State) {
		if k.Provider == provider && k.Model == model {
			st = h
		}
	})
	return st
}

// views returns every window's series aggregate at now as the JSON of
// its snapshot (each sketch's bins, exactly) and of its report.
func views(t testing.TB, s *Store, now time.Time) map[string]string {
	t.Helper()
	out := map[string]string{}
	for w := range numWindows {
		a := s.Series(Window(w), now)
		snap, err := a.Snapshot(now)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(snap)
		if err != nil {
			t.Fatal(err)
		}
		out[Window(w).String()+" snapshot"] = string(b)
		b, err = json.Marshal(a.Report(now))
		if err != nil {
			t.Fatal(err)
		}
		out[Window(w).String()+" report"] = string(b)
	}
	return out
}

func compareViews(t *testing.T, got, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if g := got[k]; g != w {
			i := 0
			for i < len(g) && i < len(w) && g[i] == w[i] {
				i++
			}
			from := max(0, i-200)
			t.Errorf("%s differs at byte %d:\n got …%.600s\nwant …%.600s", k, i, g[from:], w[from:])
		}
	}
}

// TestHistoryRoundTrip restores a store with every part in use into an
// empty store, of the same origin and of another, and compares every
// window's snapshot and report at the instant the history was taken and
// later, as the windows slide; then both stores take the same requests
// and must judge them alike, which they do only if the detectors'
// baselines came back whole.
func TestHistoryRoundTrip(t *testing.T) {
	cases := []struct {
		name   string
		origin time.Time
		later  time.Duration
	}{
		{"same origin, same instant", origin, 0},
		{"midnight origin, same instant", origin.Truncate(24 * time.Hour), 0},
		{"a day earlier origin, 45s later", origin.Add(-24 * time.Hour), 45 * time.Second},
		{"same origin, 4m later", origin, 4 * time.Minute},
		{"same origin, 50m later", origin, 50 * time.Minute},
		{"same origin, 23h later", origin, 23 * time.Hour},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			orig := populated(t)
			b, err := orig.MarshalHistory(at(historyEnd))
			if err != nil {
				t.Fatal(err)
			}
			now := at(historyEnd + c.later)
			restored := NewStore(Options{MaxRows: 3, Origin: c.origin})
			n, err := restored.RestoreHistory(b, now)
			if err != nil {
				t.Fatal(err)
			}
			if n != 4 {
				t.Errorf("restored %d rows, want 3 and the overflow row", n)
			}
			compareViews(t, views(t, restored, now), views(t, orig, now))

			// The same requests after the restart: same verdicts.
			cfg := drift.Config{Baseline: 16, MinBaseline: 8, Lag: 4, Current: 2, MinRun: 1, Evidence: 2}
			for i := range 40 {
				smp := full(2)
				smp.Set(OutputTokensPerSecond, 50+float64(i%5))
				smp.Drift = &cfg
				d := historyEnd + c.later + time.Duration(i)*time.Second
				for _, s := range []*Store{orig, restored} {
					k := key("openai", "gpt-a", "team", "x")
					s.Record(&k, &smp, at(d))
				}
			}
			end := at(historyEnd + c.later + 40*time.Second)
			compareViews(t, views(t, restored, end), views(t, orig, end))
		})
	}
}

// TestHistoryIntoLiveStore restores into a store that already has rows:
// a known key merges slice by slice, new keys take free rows, and keys
// past the cap merge into the overflow row; the merged views equal those
// of one store that saw all the requests.
func TestHistoryIntoLiveStore(t *testing.T) {
	before, after, all := newTestStore(2), newTestStore(2), newTestStore(2)
	reqs := []struct {
		k     Key
		d     time.Duration
		store *Store
	}{
		{key("openai", "a"), 1 * time.Second, before},
		{key("openai", "b"), 2 * time.Second, before},
		{key("openai", "c"), 3 * time.Second, before}, // overflow in both
		{key("openai", "a"), 4 * time.Second, after},
		{key("openai", "d"), 5 * time.Second, after},
		{key("openai", "b"), 6 * time.Second, after}, // overflow in after
	}
	for i, r := range reqs {
		record(r.store, r.k, full(float64(i+1)), r.d)
		record(all, r.k, full(float64(i+1)), r.d)
	}
	now := at(10 * time.Second)
	b, err := before.MarshalHistory(now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := after.RestoreHistory(b, now); err != nil {
		t.Fatal(err)
	}
	a := after.Aggregate(Window1m, now)
	got := map[string]int64{}
	for _, r := range a.Rows() {
		got[r.Key.Model] = r.Counts.Requests
	}
	// after has a and d; b (2 requests) and c go to the overflow row.
	want := map[string]int64{"a": 2, "d": 1, OverflowValue: 3}
	if len(got) != len(want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	for m, n := range want {
		if got[m] != n {
			t.Errorf("row %s: %d requests, want %d (rows %v)", m, got[m], n, got)
		}
	}
	if after.Rows() != 2 {
		t.Errorf("%d rows, want the cap of 2", after.Rows())
	}
}

// TestHistoryRefused feeds histories the store must not restore: each is
// refused with its reason, and the store is left empty.
func TestHistoryRefused(t *testing.T) {
	good, err := populated(t).MarshalHistory(at(historyEnd))
	if err != nil {
		t.Fatal(err)
	}
	withVersion := func(v uint64) []byte {
		b := append([]byte(nil), historyMagic...)
		b = protowire.AppendVarint(b, v)
		b = append(b, good[len(historyMagic)+1:len(good)-4]...)
		return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 0x40
	cases := []struct {
		name   string
		b      []byte
		now    time.Duration
		reason string
	}{
		{"empty file", nil, historyEnd, HistoryCorrupt},
		{"another file", []byte(`{"version":1,"window":"1m"}`), historyEnd, HistoryCorrupt},
		{"truncated", good[:len(good)*2/3], historyEnd, HistoryCorrupt},
		{"checksum cut", good[:len(good)-2], historyEnd, HistoryCorrupt},
		{"a byte flipped", flipped, historyEnd, HistoryCorrupt},
		{"version 2", withVersion(2), historyEnd, HistoryVersionMismatch},
		{"version 0", withVersion(0), historyEnd, HistoryVersionMismatch},
		{"a day and a second old", good, historyEnd + 24*time.Hour + time.Second, HistoryOld},
		{"too large", append(append([]byte(nil), good...), make([]byte, MaxHistorySize(3))...), historyEnd, HistoryTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newTestStore(3)
			n, err := s.RestoreHistory(c.b, at(c.now))
			var he *HistoryError
			if !errors.As(err, &he) {
				t.Fatalf("err = %v, want a *HistoryError", err)
			}
			if he.Reason != c.reason {
				t.Errorf("reason %q (%v), want %q", he.Reason, err, c.reason)
			}
			if n != 0 || s.Rows() != 0 || s.Aggregate(Window24h, at(c.now)).Rows() != nil && len(s.Aggregate(Window24h, at(c.now)).Rows()) != 0 {
				t.Errorf("restored %d rows, store has %d: want none", n, s.Rows())
			}
		})
	}
}

// TestHistoryForwardCompatible adds what a later version might write to
// every message: a field of a number this version does not know, and a
// sketch of a metric it does not know. The history still restores, the
// same.
func TestHistoryForwardCompatible(t *testing.T) {
	orig := populated(t)
	now := at(historyEnd)
	b, err := orig.MarshalHistory(now)
	if err != nil {
		t.Fatal(err)
	}
	// messages are the message fields, by the message they are in.
	type field struct {
		in  string
		num protowire.Number
	}
	messages := map[field]string{
		{"body", fieldRow}:            "row",
		{"row", fieldRowLabel}:        "label",
		{"row", fieldRowSlice}:        "slice",
		{"row", fieldRowInflight}:     "slice",
		{"row", fieldRowHealth}:       "detector",
		{"slice", fieldSliceCounts}:   "counts",
		{"slice", fieldSliceSketch}:   "sketch",
		{"slice", fieldSliceBucket}:   "bucket",
		{"bucket", fieldBucketSketch}: "sketch",
	}
	future := protofields.AppendString(nil, fieldSketchMetric, "time_to_last_token")
	future = protofields.AppendBytes(future, fieldSketchProto, []byte{0xff})
	var rewrite func(b []byte, in string) []byte
	rewrite = func(b []byte, in string) []byte {
		var out []byte
		err := protofields.Each(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
			switch typ {
			case protowire.BytesType:
				if sub, ok := messages[field{in, num}]; ok {
					raw = rewrite(raw, sub)
				}
				out = protofields.AppendBytes(out, num, raw)
			case protowire.VarintType:
				out = protofields.AppendVarint(out, num, v)
			case protowire.Fixed64Type:
				out = protowire.AppendFixed64(protowire.AppendTag(out, num, typ), v)
			default:
				t.Fatalf("field %d of %s: type %d", num, in, typ)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		out = protofields.AppendVarint(out, 99, 7)
		out = protofields.AppendBytes(out, 100, []byte("later"))
		if in == "slice" {
			out = protofields.AppendBytes(out, fieldSliceSketch, future)
		}
		return out
	}
	nb := append([]byte(nil), historyMagic...)
	nb = protowire.AppendVarint(nb, HistoryVersion)
	nb = append(nb, rewrite(b[len(historyMagic)+1:len(b)-4], "body")...)
	nb = binary.LittleEndian.AppendUint32(nb, crc32.ChecksumIEEE(nb))

	restored := newTestStore(3)
	if _, err := restored.RestoreHistory(nb, now); err != nil {
		t.Fatal(err)
	}
	compareViews(t, views(t, restored, now), views(t, orig, now))
}

// TestHistoryMaxSize fills a store to the brim, every row at the longest
// key with every slice, sketch bin and in-flight bucket in use and a full
// detector, and checks that its history stays within MaxHistorySize and
// comes close to it (so that the bound is the encoding's, not a guess),
// and restores.
func TestHistoryMaxSize(t *testing.T) {
	const rows = 2
	s := newTestStore(rows)
	long := strings.Repeat("x", MaxKeyString)
	now := at(25 * time.Hour)
	cfg := drift.Config{Baseline: drift.MaxBaseline, Lag: drift.MaxLag}
	for i := range rows + 1 {
		k := Key{Provider: long, Model: long[:MaxKeyString-1] + string(rune('a'+i))}
		for l := range MaxLabels {
			k.Labels = append(k.Labels, Label{long[:MaxKeyString-2] + string(rune('a'+l)), long})
		}
		// Every ring slice of every window, every bin of every sketch:
		// values spaced one bin apart, the spread MaxBins covers.
		for w := range numWindows {
			info := windows[w]
			for sl := range info.count {
				end := now.Add(-time.Duration(sl) * info.slice)
				for b := range MaxBins {
					v := indexMapping.LowerBound(minIndex + 2000 + b)
					smp := full(v * 1.0001)
					smp.Set(Cost, v*1e-3/indexMapping.LowerBound(minIndex+2000))
					smp.Inflight = int64(1) << (b % numInflightBuckets)
					smp.Drift = &cfg
					s.Record(&k, &smp, end)
				}
			}
		}
	}
	// Every cell of the strata windows' halves, every bin of its sketches.
	for i := range rows + 1 {
		k := Key{Provider: long, Model: long[:MaxKeyString-1] + string(rune('a'+i))}
		for l := range MaxLabels {
			k.Labels = append(k.Labels, Label{long[:MaxKeyString-2] + string(rune('a'+l)), long})
		}
		for w := range numWindows {
			if !Window(w).HasStrata() {
				continue
			}
			for h := range inflightHalves {
				end := now.Add(-time.Duration(int64(h) * inflightHalf(Window(w))))
				for c := range numCells {
					lo, _ := InputRange(c % numInputBuckets)
					for bin := range strataBins {
						v := strataMapping.LowerBound(strataMapping.Index(1) + bin)
						smp := full(v * 1.0001)
						smp.Set(InputTokens, float64(lo))
						smp.Inflight = int64(1) << (c / numInputBuckets)
						smp.Drift = &cfg
						s.Record(&k, &smp, end)
					}
				}
			}
		}
	}
	b, err := s.MarshalHistory(now)
	if err != nil {
		t.Fatal(err)
	}
	bound := MaxHistorySize(rows)
	t.Logf("full store of %d rows: %d bytes, bound %d", rows, len(b), bound)
	if int64(len(b)) > bound {
		t.Fatalf("history of %d bytes over MaxHistorySize %d", len(b), bound)
	}
	if int64(len(b)) < bound*3/4 {
		t.Errorf("history of %d bytes, under 3/4 of MaxHistorySize %d: the bound is loose", len(b), bound)
	}
	if _, err := newTestStore(rows).RestoreHistory(b, now); err != nil {
		t.Fatal(err)
	}
}

// TestHistoryDocumentedBound keeps docs/live-stats.md's figure for the
// default cap.
func TestHistoryDocumentedBound(t *testing.T) {
	const documented = 368 << 20 // "at most 368 MiB" in docs/live-stats.md
	if got := MaxHistorySize(0); got > documented {
		t.Errorf("MaxHistorySize(default) = %d, over the documented %d", got, documented)
	}
}

// TestHistoryEmpty writes and restores an empty store.
func TestHistoryEmpty(t *testing.T) {
	b, err := newTestStore(0).MarshalHistory(at(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	n, err := newTestStore(0).RestoreHistory(b, at(time.Minute))
	if err != nil || n != 0 {
		t.Errorf("restored %d rows, err %v: want 0, nil", n, err)
	}
	if !bytes.HasPrefix(b, historyMagic) {
		t.Errorf("history does not start with the magic")
	}
}

// BenchmarkHistory times writing and restoring the populated store (four
// rows over two hours), as a save every interval and a start do.
func BenchmarkHistory(b *testing.B) {
	s := populated(b)
	now := at(historyEnd)
	hist, err := s.MarshalHistory(now)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(hist)))
		for b.Loop() {
			if _, err := s.MarshalHistory(now); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("restore", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(hist)))
		for b.Loop() {
			if _, err := newTestStore(3).RestoreHistory(hist, now); err != nil {
				b.Fatal(err)
			}
		}
	})
}
