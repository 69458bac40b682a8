package caddymodule

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tokentap/tokentap/internal/otelexport"
	"github.com/tokentap/tokentap/internal/stats"
)

// historyFixture is a store with one row and its history, taken at now.
func historyFixture(t *testing.T, now time.Time) []byte {
	t.Helper()
	s := stats.NewStore(stats.Options{})
	k := stats.Key{Provider: "openai", Model: "gpt-h"}
	var smp stats.Sample
	smp.Set(stats.Duration, 1.5)
	s.Record(&k, &smp, now.Add(-time.Second))
	b, err := s.MarshalHistory(now)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newHistoryApp is an app of place as provisioned, logging to an
// observer, with the process's restore not yet tried.
func newHistoryApp(t *testing.T, place historyPlace) (*HistoryApp, *observer.ObservedLogs) {
	t.Helper()
	history.mu.Lock()
	history.restored, history.failing = false, false
	history.mu.Unlock()
	core, logs := observer.New(zapcore.DebugLevel)
	return &HistoryApp{logger: zap.New(core), place: place, Interval: 0}, logs
}

// TestHistoryRestoreResults restores from a file in each state a history
// can be in: each result is counted once, a history that cannot be used
// is logged once at warn with its reason and leaves the live stats empty,
// and a missing one is not logged above debug.
func TestHistoryRestoreResults(t *testing.T) {
	now := time.Now()
	good := historyFixture(t, now)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	huge := filepath.Join(dir, "huge")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: over the bound without writing it.
	if err := f.Truncate(stats.MaxHistorySize(stats.DefaultMaxRows) + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	version := append([]byte("tokentap.stats\n"), 9, 0, 0, 0, 0)
	cases := []struct {
		name, path, result string
		warn               bool
		rows               int
	}{
		{"restored", write("good", good), otelexport.HistoryRestored, false, 1},
		{"missing", filepath.Join(dir, "none"), otelexport.HistoryMissing, false, 0},
		{"corrupt", write("corrupt", []byte("not a history at all")), otelexport.HistoryCorrupt, true, 0},
		{"truncated", write("truncated", good[:len(good)/2]), otelexport.HistoryCorrupt, true, 0},
		{"another version", write("version", version), otelexport.HistoryVersion, true, 0},
		{"too large", huge, otelexport.HistoryTooLarge, true, 0},
		{"unreadable (a directory)", dir, otelexport.HistoryReadFailed, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			app, logs := newHistoryApp(t, fileHistory{path: c.path})
			store := stats.NewStore(stats.Options{})
			before := otelexport.HistoryCount(c.result)
			app.restore(store, now)
			if d := otelexport.HistoryCount(c.result) - before; d != 1 {
				t.Errorf("%s counted %d times, want once", c.result, d)
			}
			if got := store.Rows(); got != c.rows {
				t.Errorf("%d rows restored, want %d", got, c.rows)
			}
			warns := logs.FilterLevelExact(zapcore.WarnLevel).All()
			if !c.warn {
				if len(warns) != 0 || logs.FilterLevelExact(zapcore.ErrorLevel).Len() != 0 {
					t.Errorf("logged %v, want no warning", logs.All())
				}
				return
			}
			if len(warns) != 1 {
				t.Fatalf("%d warnings, want one: %v", len(warns), logs.All())
			}
			if reason := warns[0].ContextMap()["reason"]; reason != c.result {
				t.Errorf("warning's reason %v, want %s", reason, c.result)
			}
		})
	}
}

// TestHistoryRestoreOnce: a process restores once, at the first
// provisioning; a reload's provisioning leaves the live stats alone, and
// live stats with data are never restored into.
func TestHistoryRestoreOnce(t *testing.T) {
	now := time.Now()
	path := filepath.Join(t.TempDir(), "h")
	if err := os.WriteFile(path, historyFixture(t, now), 0o600); err != nil {
		t.Fatal(err)
	}
	app, _ := newHistoryApp(t, fileHistory{path: path})
	store := stats.NewStore(stats.Options{})
	app.restore(store, now)
	app.restore(store, now) // the reload's
	if got := store.Aggregate(stats.Window1m, now).Rows()[0].Counts.Requests; got != 1 {
		t.Errorf("%d requests after a second provisioning, want the history's 1", got)
	}

	app, logs := newHistoryApp(t, fileHistory{path: path})
	busy := stats.NewStore(stats.Options{})
	k := stats.Key{Provider: "openai", Model: "other"}
	var smp stats.Sample
	busy.Record(&k, &smp, now)
	app.restore(busy, now)
	if busy.Rows() != 1 || logs.FilterMessage("live stats history not restored: the live stats have data already").Len() != 1 {
		t.Errorf("restored into live stats with data: %d rows, logs %v", busy.Rows(), logs.All())
	}
}

// TestHistoryFileSave saves to a file and reads it back, leaving no
// temporary file; a place that cannot be written is counted each time
// and logged once until it recovers.
func TestHistoryFileSave(t *testing.T) {
	now := time.Now()
	dir := t.TempDir()
	place := fileHistory{path: filepath.Join(dir, "sub", "h.snapshot")}
	store := stats.NewStore(stats.Options{})
	k := stats.Key{Provider: "openai", Model: "gpt-s"}
	var smp stats.Sample
	smp.Set(stats.Duration, 2)
	store.Record(&k, &smp, now)
	for range 2 {
		if err := writeHistory(place, store, now); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "sub"))
	if len(entries) != 1 || entries[0].Name() != "h.snapshot" {
		t.Errorf("directory holds %v, want h.snapshot alone", entries)
	}
	restored := stats.NewStore(stats.Options{})
	if result, rows, err := readHistory(place, restored, now); result != otelexport.HistoryRestored || rows != 1 {
		t.Errorf("read back: %s, %d rows, %v", result, rows, err)
	}

	// A file where the directory should be: every save fails.
	blocker := filepath.Join(dir, "blocker")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	app, logs := newHistoryApp(t, fileHistory{path: filepath.Join(blocker, "h.snapshot")})
	before := otelexport.HistoryCount(otelexport.HistorySaveFailed)
	app.save()
	app.save()
	if d := otelexport.HistoryCount(otelexport.HistorySaveFailed) - before; d != 2 {
		t.Errorf("failed saves counted %d, want 2", d)
	}
	if n := logs.FilterLevelExact(zapcore.ErrorLevel).Len(); n != 1 {
		t.Errorf("%d errors logged for two failed saves, want 1", n)
	}
}
