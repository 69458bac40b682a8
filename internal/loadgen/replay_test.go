package loadgen

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/meter/tokencount"
	"github.com/tokentap/tokentap/internal/recording"
	"github.com/tokentap/tokentap/internal/simulator"
)

// mooncakeRecs is the head of Mooncake's published trace (package
// recording's test data) as a replay's requests.
func mooncakeRecs(t *testing.T) []Recorded {
	t.Helper()
	f, err := os.Open("../recording/testdata/mooncake_conversation_head.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines, _, err := recording.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	origin := recording.Origin(lines)
	recs := make([]Recorded, len(lines))
	for i, l := range lines {
		recs[i] = Recorded{At: l.Offset(origin), InputTokens: int(l.InputTokens), HashIDs: l.HashIDs, OutputTokens: int(l.OutputTokens)}
	}
	return recs
}

// TestBlockPrompt: a trace's prompts have its input lengths, counted by
// the real tokenizers, and share text where their hash ids share a
// prefix.
func TestBlockPrompt(t *testing.T) {
	recs := mooncakeRecs(t)
	for _, enc := range []string{"o200k_base", "cl100k_base"} {
		c, err := tokencount.New(enc)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			p := BlockPrompt(r.HashIDs, r.InputTokens)
			if got := int(c.Tokens([]byte(p))); got != r.InputTokens {
				t.Errorf("%s, line %d: %d tokens, want %d", enc, i+1, got, r.InputTokens)
			}
		}
	}
	// Every line of the trace begins with block 0: the same first 512
	// words; the first two lines differ from their second block on.
	a, b := BlockPrompt(recs[0].HashIDs, recs[0].InputTokens), BlockPrompt(recs[1].HashIDs, recs[1].InputTokens)
	first := blockText(0, BlockTokens)
	if !strings.HasPrefix(a, first) || !strings.HasPrefix(b, first) {
		t.Error("two prompts whose hash ids begin with 0 do not share block 0's text")
	}
	if a[len(first):len(first)+200] == b[len(first):len(first)+200] {
		t.Error("different second blocks made the same text")
	}
	if p := BlockPrompt([]int{7}, 3); len(strings.Fields(p)) != 3 {
		t.Errorf("a 3-token prompt of one id: %q", p)
	}
	if p := BlockPrompt([]int{7}, BlockTokens+10); len(strings.Fields(p)) != BlockTokens+10 {
		t.Errorf("fewer ids than blocks: %d words", len(strings.Fields(p)))
	}
}

// TestReplayTableUsageLine: the replay's table ends with the candidate's
// reported usage against the tokenizer when it was counted, as a load
// run's does, and without the line when it was not.
func TestReplayTableUsageLine(t *testing.T) {
	diff := 0.05
	for _, tt := range []struct {
		name  string
		usage *UsageVsTokenizer
		want  string
	}{
		{"counted", &UsageVsTokenizer{Requests: 4, Differing: 1, ReportedTokens: 100, TokenizerTokens: 105, Difference: &diff},
			"usage vs o200k_base tokenizer, output tokens: fast: 100 reported, 105 counted (+5.0 %), 1 of 4 requests differ."},
		{"no tokenizer", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rr := &ReplayReport{
				CandidateModel: "fast", TimeScale: 1,
				Recorded:  &Report{Models: []ModelReport{{Model: "gpt-a", Requests: 4, Succeeded: 4}}},
				Candidate: &Report{Tokenizer: "o200k_base", Models: []ModelReport{{Model: "fast", Requests: 4, Succeeded: 4, UsageVsTokenizer: tt.usage}}},
			}
			var b strings.Builder
			if err := rr.WriteTable(&b); err != nil {
				t.Fatal(err)
			}
			has := strings.Contains(b.String(), "usage vs ")
			if tt.want == "" && has || tt.want != "" && !strings.Contains(b.String(), tt.want) {
				t.Errorf("table, want usage line %q:\n%s", tt.want, b.String())
			}
		})
	}
}

// TestReplay replays recorded requests of two models against one
// candidate: each request gets its recorded output length as its cap
// (the simulator answers with exactly that many), the report groups the
// candidate's results under the recorded models, and the recorded side
// has the recorded measurements.
func TestReplay(t *testing.T) {
	base := startSimulator(t, simulator.Handler{})
	recs := []Recorded{
		{At: 0, Model: "gpt-a", InputTokens: 50, OutputTokens: 7, Measured: true, TimeToFirstToken: 300 * time.Millisecond, OutputTokensPerSecond: 50, Duration: 420 * time.Millisecond, UsageReported: true},
		{At: 20 * time.Millisecond, Model: "gpt-b", Prompt: "the captured prompt", OutputTokens: 12, Measured: true, TimeToFirstToken: 100 * time.Millisecond, OutputTokensPerSecond: 200, Duration: 155 * time.Millisecond, UsageReported: true},
		{At: 40 * time.Millisecond, Model: "gpt-a", InputTokens: 80, MaxTokens: 9, Failed: "upstream_error"},
		{At: 60 * time.Millisecond, Model: "gpt-a", InputTokens: 20, OutputTokens: 30, Measured: true, TimeToFirstToken: 500 * time.Millisecond, OutputTokensPerSecond: 25, Duration: 1660 * time.Millisecond, UsageReported: true},
	}
	var mu sync.Mutex
	got := map[int]*Result{}
	cfg := Config{URL: base + "/v1", Models: []string{"fast"}, Header: replayHeader, OnResult: func(r *Result) { mu.Lock(); got[r.Seq] = r; mu.Unlock() }}
	rr, err := Replay(context.Background(), cfg, recs, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{7, 12, 9, 30} {
		r := got[i]
		if r == nil || !r.OK() || r.OutputTokens != want || !r.UsageReported || r.Group != recs[i].Model {
			t.Errorf("request %d: %+v, want %d output tokens under %s", i, r, want, recs[i].Model)
		}
	}
	if rr.CandidateModel != "fast" || len(rr.Recorded.Models) != 2 || len(rr.Candidate.Models) != 2 ||
		rr.Recorded.Models[0].Model != "gpt-a" || rr.Candidate.Models[1].Model != "gpt-b" {
		t.Fatalf("report groups: %+v", rr)
	}
	ra, ca := rr.Recorded.Models[0], rr.Candidate.Models[0]
	if ra.Requests != 3 || ra.Succeeded != 2 || ra.Errors["upstream_error"] != 1 || ra.OutputTokens != 37 {
		t.Errorf("recorded gpt-a: %d requests, %d ok, errors %v, %d tokens", ra.Requests, ra.Succeeded, ra.Errors, ra.OutputTokens)
	}
	if ca.Requests != 3 || ca.Succeeded != 3 || ca.OutputTokens != 46 {
		t.Errorf("candidate under gpt-a: %d requests, %d ok, %d tokens", ca.Requests, ca.Succeeded, ca.OutputTokens)
	}
	// The recorded rates come back through the sketches: 25 and 50
	// tokens/s, and 300 and 500 ms to the first token.
	if q := ra.OutputTokensPerSecond; q.Count != 2 || !near(q.Mean, 37.5, 0.01) {
		t.Errorf("recorded gpt-a tokens/s %+v, want 2 samples of mean 37.5", q)
	}
	if q := ra.TimeToFirstToken; q.Count != 2 || !near(q.Mean, 0.4, 0.001) {
		t.Errorf("recorded gpt-a ttft %+v, want mean 0.4 s", q)
	}
	if q := rr.Candidate.Models[0].TimeToFirstToken; q.Count != 3 || q.P50 < fastTTFT.Seconds()*0.9 {
		t.Errorf("candidate ttft %+v, want 3 samples near %v", q, fastTTFT)
	}
	var b strings.Builder
	if err := rr.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gpt-a  recorded", "gpt-a      fast", "gpt-b  recorded", "4 requests replayed at 1x"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}

	for _, bad := range []struct {
		name string
		cfg  Config
		recs []Recorded
		ts   float64
		want string
	}{
		{"no request", cfg, nil, 1, "no request"},
		{"zero time scale", cfg, recs, 0, "time scale must be a positive number"},
		{"two candidates", Config{URL: base, Models: []string{"a", "b"}}, recs, 1, "one candidate model, got 2"},
		{"with a rate", Config{URL: base, Models: []string{"a"}, Rate: 2}, recs, 1, "--rate does not apply"},
		{"with a warm-up", Config{URL: base, Models: []string{"a"}, Warmup: 2}, recs, 1, "--warmup does not apply"},
		{"more requests than recorded", Config{URL: base, Models: []string{"a"}, Requests: 9}, recs, 1, "the replay has 4"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			if _, err := Replay(context.Background(), bad.cfg, bad.recs, bad.ts); err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("error %v, want one containing %q", err, bad.want)
			}
		})
	}
}

// replayHeader makes the simulator answer up to 1,000 tokens at 20,000
// tokens/s, so that the trace's long answers take tens of milliseconds and
// every length asked for is given.
var replayHeader = http.Header{"Tokentap-Sim-Output-Tokens": {"1000"}, "Tokentap-Sim-Tokens-Per-Second": {"20000"}}

func near(a, b, tol float64) bool { return a > b-tol && a < b+tol }

// replayTiming replays the head of Mooncake's trace at a twentieth of its
// pace (9 s in 450 ms, six requests at once at the start) and returns how
// late each request started against its scaled offset, with the output
// lengths it got.
func replayTiming(t *testing.T, base string) (late []time.Duration, lengths []int, recs []Recorded) {
	recs = mooncakeRecs(t)
	const scale = 0.05
	var mu sync.Mutex
	results := map[int]*Result{}
	cfg := Config{URL: base + "/v1", Models: []string{"fast"}, Header: replayHeader, OnResult: func(r *Result) { mu.Lock(); results[r.Seq] = r; mu.Unlock() }}
	rr, err := Replay(context.Background(), cfg, recs, scale)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		r := results[i]
		if r == nil {
			t.Fatalf("request %d was not sent", i)
		}
		late = append(late, r.Start.Sub(rr.Candidate.Started.Add(time.Duration(float64(recs[i].At)*scale))))
		lengths = append(lengths, r.OutputTokens)
	}
	return late, lengths, recs
}
