package stats

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestLiveMerges: the requests in flight travel in the snapshot and add up
// across instances by provider and model, sorted, while the windows'
// rows merge as before.
func TestLiveMerges(t *testing.T) {
	a := newTestStore(8).Aggregate(Window1m, origin)
	a.SetLive([]LiveRow{
		{Provider: "openai", Model: "gpt-4o", InFlight: 3, Waiting: 1, Receiving: 1, Stalled: 1},
		{Provider: "anthropic", Model: "claude", InFlight: 1, Receiving: 1},
	})
	b := newTestStore(8).Aggregate(Window1m, origin)
	b.SetLive([]LiveRow{
		{Provider: "openai", Model: "gpt-4o", InFlight: 2, Stalled: 2},
		{Provider: "openai", Model: "gpt-4.1", InFlight: 1, Waiting: 1},
	})
	merged := viaSnapshot(t, a)
	if err := merged.Merge(viaSnapshot(t, b)); err != nil {
		t.Fatal(err)
	}
	want := []LiveRow{
		{Provider: "anthropic", Model: "claude", InFlight: 1, Receiving: 1},
		{Provider: "openai", Model: "gpt-4.1", InFlight: 1, Waiting: 1},
		{Provider: "openai", Model: "gpt-4o", InFlight: 5, Waiting: 1, Receiving: 1, Stalled: 3},
	}
	if got := merged.Report(origin).Live; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("merged live:\n got %v\nwant %v", got, want)
	}
	// Merging does not change what was merged in.
	if got := b.Live(); len(got) != 2 || got[1].InFlight != 2 {
		t.Errorf("source changed by the merge: %v", got)
	}
}

// TestLiveReportShape: a report lists [] rather than null when nothing is
// in flight, so the page and scripts need no special case.
func TestLiveReportShape(t *testing.T) {
	b, err := json.Marshal(newTestStore(8).Aggregate(Window1m, origin).Report(origin))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"live":[]`)) {
		t.Errorf("report without requests in flight: %s, want \"live\":[]", b)
	}
}

func TestLiveRejected(t *testing.T) {
	tests := []struct {
		name string
		live string
		want string
	}{
		{"negative", `[{"provider":"p","model":"m","in_flight":-1,"waiting":-1}]`, "negative"},
		{"parts do not add up", `[{"provider":"p","model":"m","in_flight":3,"waiting":1}]`, "is not in flight 3"},
		{"too many", "[" + strings.Repeat(`{"provider":"p","model":"m"},`, MaxLiveRows) + `{"provider":"p","model":"m"}]`, "more than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := fmt.Sprintf(`{"version":%d,"window":"1m","window_seconds":60,"rows":[],"live":%s}`, SnapshotVersion, tc.live)
			snap, err := ParseSnapshot([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := snap.Aggregate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Aggregate() error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestWriteLive(t *testing.T) {
	at := time.Date(2026, 12, 7, 23, 30, 5, 0, time.UTC)
	tests := []struct {
		name string
		live []LiveRow
		want string
	}{
		{"nothing in flight", nil, ""},
		{"only zeros", []LiveRow{{Provider: "p", Model: "m"}}, ""},
		{
			"rows in flight, zeros left out",
			[]LiveRow{
				{Provider: "anthropic", Model: "claude", InFlight: 12, Waiting: 2, Receiving: 7, Stalled: 3},
				{Provider: "openai", Model: "gpt-4o"},
			},
			"\nIn flight now (23:30:05):\n" +
				"PROVIDER   MODEL   IN_FLIGHT  WAITING  RECEIVING  STALLED\n" +
				"anthropic  claude         12        2          7        3\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := WriteLive(&b, &Report{GeneratedAt: at, Live: tc.live}); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("WriteLive:\n%q\nwant\n%q", b.String(), tc.want)
			}
		})
	}
}
