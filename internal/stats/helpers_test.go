package stats

import (
	"testing"
	"time"
)

// origin is the test stores' origin: tests place records at offsets from it.
var origin = time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return origin.Add(d) }

func newTestStore(maxRows int) *Store { return NewStore(Options{MaxRows: maxRows, Origin: origin}) }

// full returns a sample with every metric observed at v.
func full(v float64) Sample {
	var s Sample
	for m := range NumMetrics {
		s.Set(Metric(m), v)
	}
	return s
}

// only returns a sample with one metric observed.
func only(m Metric, v float64) Sample {
	var s Sample
	s.Set(m, v)
	return s
}

func key(provider, model string, labels ...string) Key {
	k := Key{Provider: provider, Model: model}
	for i := 0; i+1 < len(labels); i += 2 {
		k.Labels = append(k.Labels, Label{labels[i], labels[i+1]})
	}
	return k
}

func record(s *Store, k Key, smp Sample, d time.Duration) {
	s.Record(&k, &smp, at(d))
}

// rowOf returns the aggregate row of provider/model, or nil.
func rowOf(a *Aggregate, provider, model string) *AggregateRow {
	for _, r := range a.Rows() {
		if r.Key.Provider == provider && r.Key.Model == model {
			return r
		}
	}
	return nil
}

func mustRow(t *testing.T, a *Aggregate, provider, model string) *AggregateRow {
	t.Helper()
	r := rowOf(a, provider, model)
	if r == nil {
		t.Fatalf("no row %s/%s in window %s", provider, model, a.Window())
	}
	return r
}
