package stats

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// verified is a Sample that verify_usage compared.
func verified(reported, counted int64, mismatch bool) Sample {
	s := only(OutputTokens, float64(reported))
	s.UsageVerified, s.UsageMismatch = true, mismatch
	s.UsageReported, s.UsageCounted = reported, counted
	return s
}

// TestWriteTableUsageCheck: a row's ratio is its summed reported over
// summed counted tokens, USAGE_MISMATCH counts its mismatches, "-" marks
// a row with no verified request, and the columns are absent when no row
// has one.
func TestWriteTableUsageCheck(t *testing.T) {
	s := newTestStore(0)
	record(s, key("openai", "gpt-a"), verified(100, 100, false), time.Second)
	record(s, key("openai", "gpt-a"), verified(300, 100, true), time.Second)
	record(s, key("openai", "gpt-b"), only(OutputTokens, 300), time.Second)
	now := at(2 * time.Second)
	rep := s.Aggregate(Window1m, now).Report(now)
	var a *ReportRow
	for i := range rep.Rows {
		if rep.Rows[i].Model == "gpt-a" {
			a = &rep.Rows[i]
		}
	}
	if a == nil || a.UsageCheck == nil || *a.UsageCheck != (UsageCheckSummary{Verified: 2, Mismatches: 1, ReportedTokens: 400, CountedTokens: 200, Ratio: 2}) {
		t.Fatalf("gpt-a's usage_check: %+v", a)
	}
	o, _ := ParseTableSort("model")
	var b strings.Builder
	if err := WriteTable(&b, rep, o); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	col := map[string]int{}
	for i, h := range strings.Fields(lines[0]) {
		col[h] = i
	}
	want := map[string][2]string{"gpt-a": {"2.000", "1"}, "gpt-b": {"-", "-"}}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if got := [2]string{f[col["USAGE_RATIO"]], f[col["USAGE_MISMATCH"]]}; got != want[f[col["MODEL"]]] {
			t.Errorf("%s: USAGE_RATIO, USAGE_MISMATCH %v, want %v\n%s", f[col["MODEL"]], got, want[f[col["MODEL"]]], b.String())
		}
	}

	b.Reset()
	s = newTestStore(0)
	record(s, key("openai", "gpt-b"), only(OutputTokens, 300), time.Second)
	if err := WriteTable(&b, s.Aggregate(Window1m, now).Report(now), o); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "USAGE_") {
		t.Errorf("usage columns without a verified request:\n%s", b.String())
	}
}

// TestSnapshotUsageCheck: the counts survive a snapshot's round trip, and
// a snapshot from a tokentap without them reads as none verified.
func TestSnapshotUsageCheck(t *testing.T) {
	s := newTestStore(0)
	record(s, key("openai", "gpt-a"), verified(120, 100, true), time.Second)
	now := at(2 * time.Second)
	snap, err := s.Aggregate(Window1m, now).Snapshot(now)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(snap)
	back, err := ParseSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	agg, err := back.Aggregate()
	if err != nil {
		t.Fatal(err)
	}
	rows := agg.Report(now).Rows
	if len(rows) != 1 || rows[0].UsageCheck == nil || rows[0].UsageCheck.Mismatches != 1 || rows[0].UsageCheck.Ratio != 1.2 {
		t.Fatalf("after the round trip: %+v", rows)
	}

	old := strings.NewReplacer(`"usage_verified":1,`, "", `"usage_reported_tokens":120,`, "", `"usage_counted_tokens":100,`, "", `"usage_mismatches":1,`, "").Replace(string(b))
	if old == string(b) {
		t.Fatal("the snapshot has no usage counts to take out")
	}
	back, err = ParseSnapshot([]byte(old))
	if err != nil {
		t.Fatalf("an old snapshot: %v", err)
	}
	agg, err = back.Aggregate()
	if err != nil {
		t.Fatal(err)
	}
	if r := agg.Report(now).Rows; len(r) != 1 || r[0].UsageCheck != nil {
		t.Errorf("an old snapshot's row: %+v", r)
	}

	bad := strings.Replace(string(b), `"usage_mismatches":1`, `"usage_mismatches":2`, 1)
	if _, err := ParseSnapshot([]byte(bad)); err == nil {
		if back, _ := ParseSnapshot([]byte(bad)); back != nil {
			if _, err := back.Aggregate(); err == nil {
				t.Error("more mismatches than verified requests were accepted")
			}
		}
	}
}
