package stats

import (
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"testing"
	"time"
)

// FuzzHistory feeds arbitrary bytes to the history's reader, as found and
// with their checksum made to match (so that the fuzzer reaches the
// fields): it must refuse what it cannot read with a *HistoryError and
// leave the store as it was, never panic, and never allocate past the
// store's bound (MaxHistorySize caps the input, the row cap the rows). A
// history it accepts must report and write itself again.
func FuzzHistory(f *testing.F) {
	// A small store, so that each input runs quickly: two metrics, three
	// rows over 25 s.
	s := newTestStore(2)
	for i := range 30 {
		smp := only(TimeToFirstToken, 0.1+float64(i%7)/10)
		smp.Set(OutputTokensPerSecond, 20+float64(i%9))
		smp.Inflight = int64(1 + i%70)
		smp.SLOJudged, smp.SLOMet = true, i%3 > 0
		models := []string{"a", "b", "c"}
		record(s, key("openai", models[i%3], "team", "x"), smp, time.Duration(i)*time.Second)
	}
	now := at(25 * time.Second)
	b, err := s.MarshalHistory(now)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	empty, _ := newTestStore(0).MarshalHistory(now)
	f.Add(empty)
	// A row with strata cells and the counts that came later, and a
	// history cut short, for the mutator to start from.
	withStrata := newTestStore(2)
	for i := range 12 {
		smp := only(TimeToFirstToken, 0.2+float64(i%5)/10)
		smp.Set(OutputTokensPerSecond, 30+float64(i%4))
		smp.Set(InputTokens, float64(int64(300)<<(i%4)))
		smp.Inflight = int64(1 + i%3)
		smp.Buffered, smp.Throttled = i%4 == 0, i%5 == 0
		record(withStrata, key("anthropic", "d"), smp, time.Duration(i)*time.Second)
	}
	strata, err := withStrata.MarshalHistory(now)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(strata)
	f.Add(b[:len(b)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		inputs := [][]byte{b}
		if len(b) >= 4 {
			fixed := append([]byte(nil), b...)
			binary.LittleEndian.PutUint32(fixed[len(fixed)-4:], crc32.ChecksumIEEE(fixed[:len(fixed)-4]))
			inputs = append(inputs, fixed)
		}
		for _, in := range inputs {
			st := newTestStore(2)
			if _, err := st.RestoreHistory(in, now); err != nil {
				if _, ok := err.(*HistoryError); !ok {
					t.Fatalf("error %v is not a *HistoryError", err)
				}
				if st.Rows() != 0 || len(st.Aggregate(Window24h, now).Rows()) != 0 {
					t.Fatalf("a refused history changed the store")
				}
				continue
			}
			for _, w := range []Window{Window1m, Window24h} {
				if _, err := json.Marshal(st.Series(w, now).Report(now)); err != nil {
					t.Fatal(err)
				}
			}
			smp := full(2)
			k := key("openai", "a", "team", "x")
			st.Record(&k, &smp, now)
			if _, err := st.MarshalHistory(now); err != nil {
				t.Fatalf("writing an accepted history again: %v", err)
			}
		}
	})
}
