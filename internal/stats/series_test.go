package stats

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestSeries: a row's series has every slice of the window, oldest first,
// each with the counts and metrics of its own requests; a slice without
// one is there, empty; requests older than the window are not.
func TestSeries(t *testing.T) {
	s := newTestStore(0)
	k := key("openai", "gpt-a")
	// The 1m window's slices are 10 s long. Slice 0 (0-10 s): two requests
	// at 40 tokens/s; slice 2 (20-30 s): one at 80 and an error; a
	// request at -65 s is out of the window at 55 s.
	record(s, k, only(OutputTokensPerSecond, 40), 1*time.Second)
	record(s, k, only(OutputTokensPerSecond, 40), 9*time.Second)
	record(s, k, only(OutputTokensPerSecond, 80), 21*time.Second)
	failed := Sample{Error: true}
	record(s, k, failed, 29*time.Second)
	record(s, k, only(OutputTokensPerSecond, 10), -65*time.Second)

	now := at(55 * time.Second)
	rep := s.Series(Window1m, now).Report(now)
	if len(rep.Rows) != 1 {
		t.Fatalf("%d rows", len(rep.Rows))
	}
	series := rep.Rows[0].Series
	if len(series) != 6 {
		t.Fatalf("%d slices, want 6", len(series))
	}
	type slice struct {
		start    time.Duration
		requests int64
		errors   int64
		tpsP50   float64 // 0: no point
	}
	want := []slice{{0, 2, 0, 40}, {10 * time.Second, 0, 0, 0}, {20 * time.Second, 2, 1, 80}, {30 * time.Second, 0, 0, 0}, {40 * time.Second, 0, 0, 0}, {50 * time.Second, 0, 0, 0}}
	for i, w := range want {
		got := series[i]
		if !got.Start.Equal(at(w.start)) || got.Seconds != 10 || got.Requests != w.requests || got.Errors != w.errors {
			t.Errorf("slice %d: start %v, %d s, %d requests, %d errors; want %v, 10 s, %d, %d",
				i, got.Start, got.Seconds, got.Requests, got.Errors, at(w.start), w.requests, w.errors)
		}
		p50, ok := got.Metrics.OutputTokensPerSecond.Quantiles["p50"]
		if ok != (w.tpsP50 > 0) || ok && (p50 < w.tpsP50*(1-RelativeAccuracy) || p50 > w.tpsP50*(1+RelativeAccuracy)) {
			t.Errorf("slice %d: tokens/s p50 %v (%v), want %v", i, p50, ok, w.tpsP50)
		}
	}
	if n := rep.Rows[0].Requests; n != 4 {
		t.Errorf("row requests %d, want the window's 4", n)
	}

	// Without series, the JSON has none.
	b, _ := json.Marshal(s.Aggregate(Window1m, now).Report(now))
	var doc struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if _, ok := doc.Rows[0]["series"]; ok {
		t.Error("a report without series has a series key")
	}
}

// TestDefaultOriginAligned: a store's default origin is a UTC midnight, so
// that the slices of instances started at different times line up.
func TestDefaultOriginAligned(t *testing.T) {
	s := NewStore(Options{})
	if s.origin.UnixNano()%int64(24*time.Hour) != 0 || time.Since(s.origin) > 24*time.Hour {
		t.Errorf("origin %v: want the last UTC midnight", s.origin)
	}
	// Every window's slice divides the day, so the alignment holds for all.
	for w := range numWindows {
		if dayAligned%windows[w].slice != 0 {
			t.Errorf("window %s: slice %v does not divide a day", Window(w), windows[w].slice)
		}
	}
}

// TestSnapshotSeriesBounded: a document with more slices than the window
// has, or slices of another length, is refused.
func TestSnapshotSeriesBounded(t *testing.T) {
	slice := `{"start":"2026-12-02T15:00:00Z","seconds":10,"requests":1,"sketches":{}}`
	many := slice
	for range 6 {
		many += "," + slice
	}
	tests := []struct{ name, doc, want string }{
		{"too many slices", `{"version":1,"window":"1m","rows":[{"provider":"p","model":"m","requests":1,"series":[` + many + `]}]}`, "7 slices: window 1m has 6"},
		{"another slice length", `{"version":1,"window":"5m","rows":[{"provider":"p","model":"m","requests":1,"series":[` + slice + `]}]}`, "10 seconds, want 5m's 30"},
		{"a negative count in a slice", `{"version":1,"window":"1m","rows":[{"provider":"p","model":"m","requests":1,"series":[{"start":"2026-12-02T15:00:00Z","seconds":10,"requests":-1}]}]}`, "slice 0: negative count"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := ParseSnapshot([]byte(tt.doc))
			if err == nil {
				_, err = snap.Aggregate()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
