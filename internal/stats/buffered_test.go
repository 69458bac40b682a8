package stats

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/meter"
)

// TestBufferedCount: a row counts its buffered streams, the report and its
// snapshot carry the count, and the table shows a BUFFERED column only
// when some row has one.
func TestBufferedCount(t *testing.T) {
	s := newTestStore(0)
	for i := range 5 {
		smp := SampleOf(&meter.Measurement{Streamed: true, Buffered: i < 2, Usage: meter.Usage{OutputTokens: -1, InputTokens: -1}})
		record(s, key("openai", "gpt-a"), smp, time.Second)
	}
	record(s, key("openai", "gpt-b"), only(OutputTokens, 300), time.Second)
	now := at(2 * time.Second)
	agg := s.Aggregate(Window1m, now)
	rep := agg.Report(now)
	got := map[string]int64{}
	for _, r := range rep.Rows {
		got[r.Model] = r.Buffered
	}
	if got["gpt-a"] != 2 || got["gpt-b"] != 0 {
		t.Errorf("buffered by model %v, want gpt-a 2, gpt-b 0", got)
	}

	snap, err := agg.Snapshot(now)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(snap)
	back, err := ParseSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	again, err := back.Aggregate()
	if err != nil {
		t.Fatal(err)
	}
	if r := mustRow(t, again, "openai", "gpt-a"); r.Counts.Buffered != 2 {
		t.Errorf("through a snapshot: buffered %d, want 2", r.Counts.Buffered)
	}

	o, _ := ParseTableSort("model")
	var tb strings.Builder
	if err := WriteTable(&tb, rep, o); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(tb.String()), "\n")
	col := -1
	for i, h := range strings.Fields(lines[0]) {
		if h == "BUFFERED" {
			col = i
		}
	}
	if col < 0 {
		t.Fatalf("no BUFFERED column:\n%s", tb.String())
	}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if want := map[string]string{"gpt-a": "2", "gpt-b": "0"}[f[1]]; f[col] != want {
			t.Errorf("%s: BUFFERED %s, want %s\n%s", f[1], f[col], want, tb.String())
		}
	}

	tb.Reset()
	s = newTestStore(0)
	record(s, key("openai", "gpt-b"), only(OutputTokens, 300), time.Second)
	if err := WriteTable(&tb, s.Aggregate(Window1m, now).Report(now), o); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(tb.String(), "BUFFERED") {
		t.Errorf("BUFFERED column without a buffered stream:\n%s", tb.String())
	}
}

// TestSnapshotBufferedField: a snapshot from a tokentap that did not count
// buffered streams (no "buffered") parses, with none; a negative count or
// one over the requests is refused when the snapshot is read.
func TestSnapshotBufferedField(t *testing.T) {
	s := newTestStore(0)
	record(s, key("openai", "gpt-a"), only(OutputTokens, 300), time.Second)
	now := at(2 * time.Second)
	snap, err := s.Aggregate(Window1m, now).Snapshot(now)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(snap)
	if strings.Contains(string(b), `"buffered"`) {
		t.Fatalf("a snapshot without buffered streams writes the field: %s", b)
	}
	if old, err := ParseSnapshot(b); err != nil {
		t.Errorf("a snapshot without the field: %v", err)
	} else if _, err := old.Aggregate(); err != nil {
		t.Errorf("a snapshot without the field: %v", err)
	}
	for _, tt := range []struct{ name, value string }{{"negative", "-1"}, {"over the requests", "2"}} {
		bad := strings.Replace(string(b), `"requests":1,`, `"requests":1,"buffered":`+tt.value+`,`, 1)
		if bad == string(b) {
			t.Fatalf("no requests count to put buffered beside: %s", b)
		}
		snap, err := ParseSnapshot([]byte(bad))
		if err == nil {
			_, err = snap.Aggregate()
		}
		if err == nil {
			t.Errorf("%s buffered count accepted", tt.name)
		}
	}
}
