package meter

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// byExtension is the content type a fixture is served with in tests:
// .json files as a whole body, .ndjson as NDJSON, the rest as SSE.
func byExtension(file string) []string {
	switch filepath.Ext(file) {
	case ".json":
		return []string{"application/json"}
	case ".ndjson":
		return []string{"application/x-ndjson"}
	}
	return []string{"text/event-stream"}
}

// checkSplitInvariance is the test every dialect shares: however a fixture's
// bytes are cut into writes (every single cut point, then random multi-way
// cuts), the measurement is the one of the whole input. Times are fed at
// one instant, since which write completes an event is all a cut changes.
func checkSplitInvariance(t *testing.T, newDialect func() Dialect, glob string, contentTypes func(file string) []string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", glob))
	if len(files) == 0 {
		t.Fatalf("no fixtures match %s", glob)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, ct := range contentTypes(f) {
			whole := measureCuts(newDialect, ct, body, nil)
			for c := 0; c <= len(body); c++ {
				if got := measureCuts(newDialect, ct, body, []int{c}); !reflect.DeepEqual(got, whole) {
					t.Fatalf("%s as %s: split at %d differs:\n got %+v\nwant %+v", f, ct, c, got, whole)
				}
			}
			for i := 0; i < 20; i++ {
				if got := measureCuts(newDialect, ct, body, randomCuts(rnd, len(body), 40)); !reflect.DeepEqual(got, whole) {
					t.Fatalf("%s as %s: split measurement differs:\n got %+v\nwant %+v", f, ct, got, whole)
				}
			}
		}
	}
}

// measureCuts measures body served as contentType, written in the pieces
// that cuts (ascending offsets) make of it, all at one instant: which write
// completes an event is all a cut changes.
func measureCuts(newDialect func() Dialect, contentType string, body []byte, cuts []int) Measurement {
	mt := New(newDialect(), Options{}, t0)
	mt.Response(200, contentType, "")
	prev := 0
	for _, c := range append(cuts, len(body)) {
		mt.Write(body[prev:c], t0.Add(step))
		prev = c
	}
	return *mt.Finish(t0.Add(step), OutcomeUnknown, "")
}

// randomCuts cuts n bytes from offset 0 on, every 1 to maxGap bytes.
func randomCuts(rnd *rand.Rand, n, maxGap int) []int {
	var cuts []int
	for c := 0; c < n; c += 1 + rnd.IntN(maxGap) {
		cuts = append(cuts, c)
	}
	return cuts
}

// fuzzSeeds adds every fixture of a dialect, whole and cut at every
// event boundary and its neighbours (TestAnthropicSplitInvariance and its
// siblings already try every split point without the fuzzer's overhead).
func fuzzSeeds(f *testing.F, dir string) {
	files, _ := filepath.Glob(filepath.Join("testdata", dir, "*"))
	if len(files) == 0 {
		f.Fatal("no fixtures in", dir)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		// The whole input, a cut inside the first event, and a cut in the
		// middle of every blank line (the split of a CR/LF pair included):
		// checkSplitInvariance covers every other cut point without the
		// fuzzer's instrumentation, and a small corpus leaves the bounded
		// fuzzing time to fuzzing rather than to replaying seeds.
		f.Add(b, uint16(0))
		f.Add(b, uint16(min(len(b), 7)))
		for i := 1; i < len(b); i++ {
			if b[i] == '\n' && (b[i-1] == '\n' || b[i-1] == '\r') {
				f.Add(b, uint16(i))
			}
		}
	}
}

// fuzzDialect reads data as a stream, whole and cut in two, and as a body,
// and fails if the two stream readings differ or a count is impossible.
func fuzzDialect(t *testing.T, newDialect func() Dialect, path, streamType string, data []byte, cut uint16) {
	c := int(cut) % (len(data) + 1)
	run := func(contentType string, pieces ...[]byte) Measurement {
		mt := New(newDialect(), Options{MaxEventSize: 4096}, t0)
		mt.Request(path, data, false)
		mt.Response(200, contentType, "")
		for _, p := range pieces {
			mt.Write(p, t0.Add(step))
		}
		return *mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
	}
	whole := run(streamType, data)
	split := run(streamType, data[:c], data[c:])
	if !reflect.DeepEqual(whole, split) {
		t.Fatalf("cut at %d changed the measurement:\nwhole %+v\nsplit %+v", c, whole, split)
	}
	for _, m := range []Measurement{whole, run("application/json", data[:c], data[c:])} {
		u := m.Usage
		if u.InputTokens < -1 || u.OutputTokens < -1 || u.CacheReadInputTokens < -1 ||
			u.CacheCreationInputTokens < -1 || u.ReasoningOutputTokens < -1 || m.Chunks < 0 ||
			m.OutputEvents > m.Chunks || len(m.FinishReasons) > maxChoices {
			t.Fatalf("impossible measurement: %+v", m)
		}
	}
}

// checkFixtureAllocations holds a dialect's hot path to its promise on
// every event of every fixture matching pattern (under testdata): after the
// whole fixture was replayed once (the first sight of an id or a model is
// copied), reading any of its events again allocates nothing. split cuts a
// fixture into its events (SSE events or NDJSON lines).
func checkFixtureAllocations(t *testing.T, newDialect func() Dialect, pattern, contentType string, split func([]byte) [][]byte) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", pattern))
	if len(files) == 0 {
		t.Fatalf("no fixtures match %s", pattern)
	}
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		mt := New(newDialect(), Options{}, t0)
		mt.Response(200, contentType, "")
		mt.Write(body, t0.Add(step))
		for i, ev := range split(body) {
			if !bytes.HasSuffix(ev, []byte("\n")) {
				// The fixture's last event without its end only
				// dispatches at Finish; complete it so it is read here.
				ev = append(ev[:len(ev):len(ev)], '\n')
			}
			if contentType == "text/event-stream" && !bytes.HasSuffix(ev, []byte("\n\n")) {
				ev = append(ev[:len(ev):len(ev)], '\n')
			}
			allocs := testing.AllocsPerRun(200, func() {
				mt.Write(ev, t0.Add(step))
			})
			if allocs != 0 {
				t.Errorf("%s event %d: %v allocations, want 0:\n%s", filepath.Base(f), i, allocs, ev)
			}
		}
	}
}
