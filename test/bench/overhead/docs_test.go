package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// update rewrites docs/BENCHMARKS.md's current results from the newest
// results file instead of checking them.
var update = flag.Bool("update", false, "rewrite docs/BENCHMARKS.md's current results from the newest file in test/bench/results")

const (
	benchmarksDoc = "../../../docs/BENCHMARKS.md"
	resultsDir    = "../results"
	// The current results sit between these two lines; everything between
	// them is the rendering of the newest results file.
	resultsBegin = "<!-- current results: rendered from the newest test/bench/results file; refresh with the command above -->"
	resultsEnd   = "<!-- end of current results -->"
	// The streaming suite's results, likewise, from the newest
	// suite-<date>-<commit>.json.
	suitePrefix = "suite-"
	// A/B series of two builds, ab-<date>-<commit>-vs-<commit>.json, are
	// kept as data and rendered nowhere.
	abPrefix   = "ab-"
	suiteBegin = "<!-- suite results: rendered from the newest test/bench/results/suite- file; refresh with the command above -->"
	suiteEnd   = "<!-- end of suite results -->"
)

// resultsName is how a run's results file is named: the UTC date it
// started and the first twelve hex digits of its commit.
var resultsName = regexp.MustCompile(`^(\d{4}-\d{2}-\d{2})-([0-9a-f]{12})\.json$`)

// TestBenchmarksDoc holds docs/BENCHMARKS.md's current results to the data
// they come from: the text between the markers must be exactly what
// --render prints for the newest results file, so that no figure in it
// can drift from the file, be edited by hand, or outlive a newer run.
// Every results file must be a full run (not --short, not --compare) of a
// clean checkout, named after its date and commit, with the targets the
// code judges today.
func TestBenchmarksDoc(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(resultsDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no results file in %s", resultsDir)
	}
	var newest *report
	var newestFile string
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), suitePrefix) {
			continue // TestBenchmarksSuiteDoc's
		}
		if strings.HasPrefix(filepath.Base(f), abPrefix) {
			continue // an A/B series of two builds (--compare --runs), kept as data
		}
		rep, err := readReport(f)
		if err != nil {
			t.Error(err)
			continue
		}
		m := resultsName.FindStringSubmatch(filepath.Base(f))
		if m == nil {
			t.Errorf("%s: want a name <YYYY-MM-DD>-<12 hex digits of the commit>.json", f)
			continue
		}
		if day := rep.Started.UTC().Format("2006-01-02"); day != m[1] {
			t.Errorf("%s: the run started on %s", f, day)
		}
		if !strings.HasPrefix(rep.Commit, m[2]) || rep.Dirty {
			t.Errorf("%s: the run was at commit %q (uncommitted changes: %v); want a clean checkout of %s", f, rep.Commit, rep.Dirty, m[2])
		}
		if rep.Settings.Short || len(rep.Targets) == 0 {
			t.Errorf("%s: a --short or --compare run; the results are a full run's", f)
		}
		if newest == nil || rep.Started.After(newest.Started) {
			newest, newestFile = rep, f
		}
	}
	if newest == nil {
		t.FailNow()
	}
	// The file's verdicts are the code's: a target changed since the run
	// would leave the document judging by the old one.
	if got := newest.targets(); !reflect.DeepEqual(got, newest.Targets) {
		t.Errorf("%s: its targets differ from what report.go judges the same figures by today; run the benchmark again\nfile: %+v\ncode: %+v", newestFile, newest.Targets, got)
	}

	var rendered bytes.Buffer
	newest.writeResults(&rendered)
	doc, err := os.ReadFile(benchmarksDoc)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), resultsBegin+"\n")
	current, after, ok2 := strings.Cut(rest, resultsEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s: want the current results between the lines\n%s\n%s", benchmarksDoc, resultsBegin, resultsEnd)
	}
	want := "\n" + rendered.String()
	if current == want {
		return
	}
	if *update {
		out := before + resultsBegin + "\n" + want + resultsEnd + after
		if err := os.WriteFile(benchmarksDoc, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the current results from %s", newestFile)
		return
	}
	t.Errorf("%s: the current results are not the rendering of the newest results file, %s; refresh them with\n\tgo test ./test/bench/overhead -run TestBenchmarksDoc -update\ngot:\n%s\nwant:\n%s", benchmarksDoc, newestFile, current, want)
}

// TestBenchmarksSuiteDoc holds docs/BENCHMARKS.md's streaming suite results
// to the newest suite results file, as TestBenchmarksDoc does the levels':
// a full suite run (not --short) of a clean checkout, named after its date
// and commit.
func TestBenchmarksSuiteDoc(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(resultsDir, suitePrefix+"*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no suite results file in %s", resultsDir)
	}
	var newest *report
	var newestFile string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rep report
		if err := json.Unmarshal(b, &rep); err != nil || rep.Suite == nil {
			t.Errorf("%s: not a suite run's results (%v)", f, err)
			continue
		}
		m := resultsName.FindStringSubmatch(strings.TrimPrefix(filepath.Base(f), suitePrefix))
		if m == nil {
			t.Errorf("%s: want a name suite-<YYYY-MM-DD>-<12 hex digits of the commit>.json", f)
			continue
		}
		if day := rep.Started.UTC().Format("2006-01-02"); day != m[1] {
			t.Errorf("%s: the run started on %s", f, day)
		}
		if !strings.HasPrefix(rep.Commit, m[2]) || rep.Dirty || rep.Settings.Short {
			t.Errorf("%s: commit %q, uncommitted changes %v, short %v; want a full run of a clean checkout of %s", f, rep.Commit, rep.Dirty, rep.Settings.Short, m[2])
		}
		if newest == nil || rep.Started.After(newest.Started) {
			newest, newestFile = &rep, f
		}
	}
	if newest == nil {
		t.FailNow()
	}
	var rendered bytes.Buffer
	newest.writeSuiteResults(&rendered)
	doc, err := os.ReadFile(benchmarksDoc)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(doc), suiteBegin+"\n")
	current, after, ok2 := strings.Cut(rest, suiteEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s: want the suite results between the lines\n%s\n%s", benchmarksDoc, suiteBegin, suiteEnd)
	}
	want := "\n" + rendered.String()
	if current == want {
		return
	}
	if *update {
		out := before + suiteBegin + "\n" + want + suiteEnd + after
		if err := os.WriteFile(benchmarksDoc, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the suite results from %s", newestFile)
		return
	}
	t.Errorf("%s: the suite results are not the rendering of the newest suite results file, %s; refresh them with\n\tgo test ./test/bench/overhead -run TestBenchmarksSuiteDoc -update\ngot:\n%s\nwant:\n%s", benchmarksDoc, newestFile, current, want)
}
