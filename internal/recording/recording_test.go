package recording

import (
	"bytes"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/sink"
)

// TestReadMooncakeTrace reads lines of Mooncake's own published trace: the
// format's ground truth, not a file of ours.
func TestReadMooncakeTrace(t *testing.T) {
	f, err := os.Open("testdata/mooncake_conversation_head.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines, format, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if format != Mooncake || len(lines) != 13 {
		t.Fatalf("format %q, %d lines; want mooncake, 13", format, len(lines))
	}
	origin := Origin(lines)
	wantOffsets := []time.Duration{0, 0, 0, 0, 0, 0, 3 * time.Second, 3 * time.Second, 3 * time.Second, 3 * time.Second,
		5999 * time.Millisecond, 5999 * time.Millisecond, 9 * time.Second}
	for i, l := range lines {
		if got := l.Offset(origin); got != wantOffsets[i] {
			t.Errorf("line %d: offset %v, want %v", i+1, got, wantOffsets[i])
		}
		// Every line of the real trace has one hash id per block of
		// MooncakeBlockTokens, the last one partly filled.
		if want := int((l.InputTokens + MooncakeBlockTokens - 1) / MooncakeBlockTokens); len(l.HashIDs) != want {
			t.Errorf("line %d: %d hash ids for %d input tokens, want %d", i+1, len(l.HashIDs), l.InputTokens, want)
		}
		if l.MaxTokens != l.OutputTokens || l.OutputTokens < 1 || l.OutputTokensSource != "mooncake" {
			t.Errorf("line %d: max %d, output %d (%s)", i+1, l.MaxTokens, l.OutputTokens, l.OutputTokensSource)
		}
	}
	if l := lines[0]; l.InputTokens != 6758 || l.OutputTokens != 500 || l.HashIDs[13] != 13 {
		t.Errorf("first line %+v", l)
	}
}

// TestMooncakeRoundTrip writes the published trace back out and reads it
// again: the same timestamps, lengths and hash ids.
func TestMooncakeRoundTrip(t *testing.T) {
	b, err := os.ReadFile("testdata/mooncake_conversation_head.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	written, skipped, err := WriteMooncake(&out, in)
	if err != nil || written != len(in) || skipped != 0 {
		t.Fatalf("WriteMooncake: %d written, %d skipped, %v", written, skipped, err)
	}
	back, format, err := Read(&out)
	if err != nil || format != Mooncake {
		t.Fatalf("reading back: %q, %v", format, err)
	}
	if !reflect.DeepEqual(in, back) {
		t.Errorf("round trip differs:\n%+v\n%+v", in, back)
	}
}

// TestRecordAndReadBack records results through a Recorder and reads the
// file back: every field as measured, in start order.
func TestRecordAndReadBack(t *testing.T) {
	start := time.Date(2026, 12, 6, 9, 0, 0, 123456789, time.UTC)
	results := []*sink.Result{
		result(start.Add(2*time.Second), "gpt-4o-mini", func(m *meter.Measurement) {}),
		result(start, "claude-haiku", func(m *meter.Measurement) {
			m.Dialect, m.Request.HasMaxTokens, m.Request.MaxTokens = "anthropic", true, 256
		}),
		result(start.Add(time.Second), "gpt-4o-mini", func(m *meter.Measurement) {
			m.Outcome, m.StatusCode, m.FirstToken, m.LastToken = meter.OutcomeUpstreamError, 429, 0, 0
			m.Usage = meter.Usage{InputTokens: -1, OutputTokens: -1, Source: meter.UsageAbsent}
		}),
	}
	results[0].Content.Input.JSON = `[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`
	var buf closeBuffer
	rec := NewRecorder(&buf, nil)
	for _, r := range results {
		rec.Record(r)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if !buf.closed {
		t.Error("Close did not close the writer")
	}
	if rec.Written() != 3 || rec.Dropped() != 0 || rec.Failed() != 0 {
		t.Errorf("written %d, dropped %d, failed %d", rec.Written(), rec.Dropped(), rec.Failed())
	}
	lines, format, err := Read(&buf.Buffer)
	if err != nil || format != Tokentap || len(lines) != 3 {
		t.Fatalf("%d lines, %q, %v", len(lines), format, err)
	}
	want := []Line{
		{Start: start, Route: "/v1/chat/completions", API: "anthropic", Provider: "openai", Model: "claude-haiku", ResponseModel: "claude-haiku-2026",
			Stream: true, InputTokens: 12, MaxTokens: 256, OutputTokens: 41, OutputTokensSource: "reported", Outcome: "completed", Status: 200,
			TimeToFirstToken: 0.25, OutputTokensPerSecond: 40 / 0.8, Duration: 1.1},
		{Start: start.Add(time.Second), Route: "/v1/chat/completions", API: "openai_chat", Provider: "openai", Model: "gpt-4o-mini", ResponseModel: "gpt-4o-mini-2026",
			Stream: true, InputTokens: -1, OutputTokens: -1, OutputTokensSource: "absent", Outcome: "upstream_error", Status: 429, Duration: 1.1},
		{Start: start.Add(2 * time.Second), Route: "/v1/chat/completions", API: "openai_chat", Provider: "openai", Model: "gpt-4o-mini", ResponseModel: "gpt-4o-mini-2026",
			Stream: true, InputTokens: 12, OutputTokens: 41, OutputTokensSource: "reported", Outcome: "completed", Status: 200,
			TimeToFirstToken: 0.25, OutputTokensPerSecond: 40 / 0.8, Duration: 1.1,
			Input: []byte(`[{"role":"user","parts":[{"type":"text","content":"hi"}]}]`)},
	}
	for i := range want {
		if !reflect.DeepEqual(lines[i], want[i]) {
			t.Errorf("line %d:\n got %+v\nwant %+v", i, lines[i], want[i])
		}
	}
}

// result is a finished exchange of model that started at start.
func result(start time.Time, model string, edit func(*meter.Measurement)) *sink.Result {
	m := &meter.Measurement{
		Dialect: "openai_chat", Start: start, Request: meter.Request{Model: model, Stream: true, HasStream: true},
		StatusCode: 200, Streamed: true, FirstToken: 250 * time.Millisecond, LastToken: 1050 * time.Millisecond, End: 1100 * time.Millisecond,
		OutputEvents: 41, EstimatedOutputTokens: 41, FirstEventEstimate: 1,
		Usage:         meter.Usage{InputTokens: 12, OutputTokens: 41, CacheReadInputTokens: -1, CacheCreationInputTokens: -1, ReasoningOutputTokens: -1, Source: meter.UsageReported},
		Billed:        meter.BilledUsage{InputTokens: -1, OutputTokens: -1},
		ResponseModel: model + "-2026", Outcome: meter.OutcomeCompleted,
	}
	edit(m)
	return &sink.Result{M: m, Provider: "openai", Route: "/v1/chat/completions"}
}

type closeBuffer struct {
	bytes.Buffer
	closed bool
}

func (b *closeBuffer) Close() error { b.closed = true; return nil }

// blockingWriter holds every write until released, as a stalled disk does.
type blockingWriter struct {
	release chan struct{}
	once    sync.Once
	n       int
}

func (w *blockingWriter) Write(p []byte) (int, error) { <-w.release; w.n++; return len(p), nil }
func (w *blockingWriter) Close() error                { w.once.Do(func() { close(w.release) }); return nil }

// TestRecorderNeverWaits: with the writer stalled, Record returns at once
// and drops what the queue cannot hold, counting it.
func TestRecorderNeverWaits(t *testing.T) {
	w := &blockingWriter{release: make(chan struct{})}
	rec := NewRecorder(w, nil)
	r := result(time.Now(), "m", func(*meter.Measurement) {})
	// More than the writer's 64 KiB buffer holds besides the queue.
	extra := 1000
	began := time.Now()
	for range QueueLines + extra + 1 {
		rec.Record(r)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("recording %d lines to a stalled writer took %v", QueueLines+extra+1, d)
	}
	// The queue holds QueueLines, and the writer goroutine took some into
	// its buffer before the stalled write; the rest were dropped.
	if got := rec.Dropped(); got < 1 || got > int64(extra+1) {
		t.Errorf("dropped %d, want 1 to %d", got, extra+1)
	}
	close(w.release)
	w.once.Do(func() {})
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if total := rec.Written() + rec.Dropped() + rec.Failed(); total != int64(QueueLines+extra+1) {
		t.Errorf("written %d + dropped %d + failed %d = %d, want every line counted once (%d)", rec.Written(), rec.Dropped(), rec.Failed(), total, QueueLines+extra+1)
	}
	rec.Record(r)
	if rec.Dropped() == 0 {
		t.Error("a line recorded after Close was not counted as dropped")
	}
}

// failingWriter fails every write until healed.
type failingWriter struct {
	mu     sync.Mutex
	healed bool
	buf    bytes.Buffer
}

func (w *failingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.healed {
		return 0, errors.New("no space left on device")
	}
	return w.buf.Write(p)
}
func (w *failingWriter) Close() error { return nil }

// TestRecorderWriteErrors: failed writes are counted and reported once
// per run of failures; the recorder writes again once the disk recovers.
func TestRecorderWriteErrors(t *testing.T) {
	w := &failingWriter{}
	var mu sync.Mutex
	var reported []error
	rec := NewRecorder(w, func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() })
	r := result(time.Now(), "m", func(*meter.Measurement) {})
	for i := range 5 {
		rec.Record(r)
		// Counted, not only taken off the queue: a line the writer holds
		// but has not yet written would meet the healed disk below.
		waitFor(t, func() bool { return rec.Failed()+rec.Written() == int64(i+1) })
	}
	w.mu.Lock()
	w.healed = true
	w.mu.Unlock()
	rec.Record(r)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if rec.Failed() != 5 || rec.Written() != 1 {
		t.Errorf("failed %d, written %d; want 5 and 1", rec.Failed(), rec.Written())
	}
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), "no space") {
		t.Errorf("errors reported: %v, want the first one only", reported)
	}
	if lines, _, err := Read(&w.buf); err != nil || len(lines) != 1 {
		t.Errorf("after recovery: %d lines, %v", len(lines), err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}

// TestReadErrors: each malformed line is an error naming its number.
func TestReadErrors(t *testing.T) {
	ok := `{"start":"2026-12-06T09:00:00Z","model":"m","input_tokens":1,"output_tokens":2,"outcome":"completed","duration_seconds":1}`
	for _, tc := range []struct {
		name, in, want string
	}{
		{"not JSON", "{", "line 1: not a JSON object"},
		{"an array", "[1]", "line 1: not a JSON object"},
		{"neither format", `{"foo":1}`, "neither a tokentap recording"},
		{"no model", `{"start":"2026-12-06T09:00:00Z"}`, `line 1: no "model"`},
		{"bad start", `{"start":"yesterday","model":"m"}`, "line 1:"},
		{"negative count", `{"start":"2026-12-06T09:00:00Z","model":"m","input_tokens":-5}`, "negative"},
		{"negative time", `{"start":"2026-12-06T09:00:00Z","model":"m","duration_seconds":-1}`, "negative"},
		{"second line bad", ok + "\n\n" + `{"start":3}`, "line 3:"},
		{"mooncake bad timestamp", `{"timestamp":"x","input_length":5}`, `line 1: "timestamp"`},
		{"mooncake negative timestamp", `{"timestamp":-1,"input_length":5}`, `"timestamp"`},
		{"mooncake no input", `{"timestamp":0,"output_length":5}`, `neither "input_length" nor "text_input"`},
		{"mooncake fractional length", `{"timestamp":0,"input_length":5.5}`, `"input_length"`},
		{"mooncake zero output", `{"timestamp":0,"input_length":5,"output_length":0}`, `"output_length"`},
		{"mooncake too many hash ids", `{"timestamp":0,"input_length":512,"hash_ids":[1,2]}`, "more \"hash_ids\""},
		{"mooncake bad hash id", `{"timestamp":0,"input_length":512,"hash_ids":["a"]}`, `"hash_ids" holds`},
		{"mooncake text not a string", `{"timestamp":0,"text_input":5}`, `"text_input"`},
		{"formats mixed", `{"timestamp":0,"input_length":5}` + "\n" + ok, "line 2:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Read(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if lines, _, err := Read(strings.NewReader(ok + "\n")); err != nil || len(lines) != 1 {
		t.Errorf("a good line: %d lines, %v", len(lines), err)
	}
	if _, _, err := Read(io.MultiReader(strings.NewReader(`{"timestamp":0,"text_input":"`), strings.NewReader(strings.Repeat("a", MaxLineBytes)), strings.NewReader(`"}`))); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("an overlong line: %v", err)
	}
}

// TestTextInput: AIPerf's text_input becomes the line's input messages.
func TestTextInput(t *testing.T) {
	lines, _, err := Read(strings.NewReader(`{"timestamp": 1500, "text_input": "What is \"2+2\"?", "output_length": 20}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"parts":[{"content":"What is \"2+2\"?","type":"text"}],"role":"user"}]`
	if got := string(lines[0].Input); got != want || lines[0].InputTokens != -1 || lines[0].MaxTokens != 20 {
		t.Errorf("input %s, input tokens %d, max %d; want %s, -1, 20", got, lines[0].InputTokens, lines[0].MaxTokens, want)
	}
	var out bytes.Buffer
	if written, skipped, _ := WriteMooncake(&out, lines); written != 0 || skipped != 1 {
		t.Errorf("a line without an input length: written %d, skipped %d; want it skipped", written, skipped)
	}
}
