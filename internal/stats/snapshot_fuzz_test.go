package stats

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzSnapshot feeds arbitrary documents to the reader of other instances'
// sketches (`tokentap stats --from`): it must refuse what it cannot read
// with an error, never panic or allocate without bound, and what it
// accepts must merge and report.
func FuzzSnapshot(f *testing.F) {
	s := newTestStore(0)
	for i := range 200 {
		smp := full(1 + float64(i%37))
		smp.Inflight = int64(1 + i%70)
		smp.SLOJudged, smp.SLOMet = true, i%3 > 0
		record(s, key("openai", "gpt-a", "team", "x"), smp, time.Duration(i)*time.Second/4)
	}
	now := at(55 * time.Second)
	for _, a := range []*Aggregate{s.Aggregate(Window1m, now), s.Series(Window5m, now)} {
		snap, err := a.Snapshot(now)
		if err != nil {
			f.Fatal(err)
		}
		b, _ := json.Marshal(snap)
		f.Add(b)
	}
	f.Add([]byte(`{"version":1,"window":"1m","rows":[{"provider":"p","model":"m","requests":1,"by_inflight":[{"inflight_min":64,"requests":2}],"health":{"state":"slow"}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		snap, err := ParseSnapshot(b)
		if err != nil {
			return
		}
		a, err := snap.Aggregate()
		if err != nil {
			return
		}
		other := newAggregate(a.Window())
		if err := other.Merge(a); err != nil {
			t.Fatalf("merging an accepted snapshot: %v", err)
		}
		if _, err := json.Marshal(other.Report(now)); err != nil {
			t.Fatalf("reporting an accepted snapshot: %v", err)
		}
	})
}
