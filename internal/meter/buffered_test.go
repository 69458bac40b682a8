package meter

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// schedule is the arrival offsets of a stream's output events.
type schedule []time.Duration

// paced is n events, the first at ttft and each next one every after it,
// with reads of per events each sharing an arrival time (per 1: every
// event its own read).
func paced(n int, ttft, every time.Duration, per int) schedule {
	s := make(schedule, n)
	for i := range s {
		s[i] = ttft + time.Duration(i/per*per)*every
	}
	return s
}

// then is s followed by t.
func (s schedule) then(t schedule) schedule { return append(append(schedule{}, s...), t...) }

// TestBufferedRule holds the rule to the shapes of real and held streams:
// the held ones (one read or a few, after the whole generation) are
// flagged, and the real ones, fast, short, coalesced, paused or with a long
// unseen reasoning, are not.
func TestBufferedRule(t *testing.T) {
	ms := time.Millisecond
	us := time.Microsecond
	tests := []struct {
		name string
		at   schedule
		want bool
	}{
		{"held: 64 events in one read after 2 s", paced(64, 2*time.Second, 0, 1), true},
		{"held: 500 events in 16 reads 20 µs apart after 10 s", paced(500, 10*time.Second, 20*us/32, 32), true},
		{"held: 16 events, the fewest, in one read after 50 ms", paced(16, 50*ms, 0, 1), true},
		{"held: the first event let through, the other 63 held", paced(1, 300*ms, 0, 1).then(paced(63, 1500*ms, 0, 1)), true},
		{"held: 300 events over a slow path at 10,000 a second, the limit", paced(300, 3*time.Second, 100*us, 1), true},
		{"held: 15 events, fewer than the rule reads", paced(15, time.Second, 0, 1), false},
		{"held and replayed at once: no wait worth the name", paced(64, 9*ms, 0, 1), false},
		{"held in 4 KiB pieces: re-chunked, not held whole", paced(32, time.Second, 0, 1).then(paced(32, 2*time.Second, 0, 1)).then(paced(32, 3*time.Second, 0, 1)), false},
		{"held over a slow path: slower than 10,000 events a second", paced(300, 3*time.Second, 150*us, 1), false},
		{"real: a 3-token answer in 40 ms", paced(3, 30*ms, 5*ms, 1), false},
		{"real: 64 tokens at 50 a second", paced(64, 200*ms, 20*ms, 1), false},
		{"real: 64 tokens at 50 a second, 4 events to a read", paced(64, 200*ms, 20*ms, 4), false},
		{"real: 3,000 tokens a second, one an event, after 200 ms", paced(40, 200*ms, 333*us, 1), false},
		{"real: a minute of unseen reasoning, then 50 tokens at 100 a second", paced(50, time.Minute, 10*ms, 1), false},
		{"real: few large deltas (Anthropic, Gemini) written back to back", paced(6, 800*ms, 0, 1), false},
		{"real: a pause of 5 s, then the rest at the model's pace", paced(10, 200*ms, 20*ms, 1).then(paced(100, 5400*ms, 20*ms, 1)), false},
		{"real: Ollama tiny-bytes pace, 84 events at 0.35 ms after a cold start", paced(84, 2*time.Second, 350*us, 1), false},
		{"no output events", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b outputBurst
			for _, at := range tt.at {
				b.add(at)
			}
			if got := b.buffered(int64(len(tt.at))); got != tt.want {
				t.Errorf("buffered = %v, want %v (burst: %d of %d events, wait %v, span %v)", got, tt.want, b.events, len(tt.at), b.wait, b.last-b.start)
			}
		})
	}
}

// TestBufferedNotBody: a body that is not streamed is never flagged, however
// long it took and however many outputs it holds: its output arrived at
// once by design.
func TestBufferedNotBody(t *testing.T) {
	mt := exchange{200, "application/json", "/v1/chat/completions"}.start(openAIChat{}, Options{}, []byte(`{"model":"m"}`))
	mt.Write(testdata(t, "recorded", "openai/chat_text_body.json"), t0.Add(5*time.Second))
	if m := mt.Finish(t0.Add(5*time.Second), OutcomeUnknown, ""); m.Buffered || m.Streamed {
		t.Errorf("a JSON body: buffered %v, streamed %v", m.Buffered, m.Streamed)
	}
}

// TestBufferedRecordedOllama replays the real Ollama streams with the
// times Ollama stamped on each line (created_at, to the nanosecond), from
// the request's arrival (the last line's time less its total_duration):
// as they were sent they are not flagged, and held until the last line and
// written at once they are.
func TestBufferedRecordedOllama(t *testing.T) {
	for _, file := range []string{"ollama/chat_words.ndjson", "ollama/chat_bytes.ndjson"} {
		lines := ollamaLines(testdata(t, "recorded", file))
		stamps := make([]time.Time, len(lines))
		for i, l := range lines {
			ts, err := time.Parse(time.RFC3339Nano, gjson.GetBytes(l, "created_at").String())
			if err != nil {
				t.Fatalf("%s line %d: %v", file, i, err)
			}
			stamps[i] = ts
		}
		last := lines[len(lines)-1]
		start := stamps[len(stamps)-1].Add(-time.Duration(gjson.GetBytes(last, "total_duration").Int()))
		serve := func() *Meter {
			mt := new(Meter)
			mt.Init(ollama{}, Options{}, start)
			mt.Request("/api/chat", []byte(`{"model":"tiny"}`), false)
			mt.Response(200, "application/x-ndjson", "")
			return mt
		}
		t.Run(file+" as sent", func(t *testing.T) {
			mt := serve()
			for i, l := range lines {
				mt.Write(l, stamps[i])
			}
			m := mt.Finish(stamps[len(stamps)-1], OutcomeUnknown, "")
			if m.OutputEvents < bufferedMinEvents || m.Buffered {
				t.Errorf("%d output events from %v to %v: buffered %v, want false", m.OutputEvents, m.FirstToken, m.LastToken, m.Buffered)
			}
		})
		t.Run(file+" held", func(t *testing.T) {
			mt := serve()
			mt.Write(bytes.Join(lines, nil), stamps[len(stamps)-1])
			if m := mt.Finish(stamps[len(stamps)-1], OutcomeUnknown, ""); !m.Buffered {
				t.Errorf("%d output events at %v: buffered %v, want true", m.OutputEvents, m.FirstToken, m.Buffered)
			}
		})
	}
}

// checkBufferedReplay checks the rule on a recording of any dialect, whose
// events have no times of their own: replayed at one event per step (m) it
// is not flagged, and held for two seconds and written at once it is
// flagged exactly when it has enough output events for the rule to judge.
// That the second holds for every recording shows every dialect reports
// its output events where the rule reads them.
func checkBufferedReplay(t *testing.T, d recordedDialect, fixture string, m *Measurement) {
	t.Helper()
	if m.Buffered {
		t.Errorf("replayed an event every %v: buffered", step)
	}
	mt := exchange{200, "text/event-stream", d.path}.start(d.newDialect(), Options{}, []byte(d.request))
	mt.Write(testdata(t, "recorded", fixture), t0.Add(2*time.Second))
	held := mt.Finish(t0.Add(2*time.Second), OutcomeUnknown, "")
	if want := held.OutputEvents >= bufferedMinEvents; held.Buffered != want {
		t.Errorf("held and written at once, %d output events: buffered %v, want %v", held.OutputEvents, held.Buffered, want)
	}
}

// TestOutputBurstAllocs: following the burst allocates nothing per event.
func TestOutputBurstAllocs(t *testing.T) {
	var b outputBurst
	at := time.Duration(0)
	if n := testing.AllocsPerRun(1000, func() {
		at += time.Millisecond
		b.add(at)
		_ = b.buffered(int64(at))
	}); n != 0 {
		t.Errorf("%v allocations per event", n)
	}
}

func ExampleMeter_buffered() {
	mt := exchange{200, "text/event-stream", "/v1/chat/completions"}.start(openAIChat{}, Options{}, []byte(`{"model":"m","stream":true}`))
	var body []byte
	for range 20 {
		body = append(body, `data: {"choices":[{"index":0,"delta":{"content":" word"}}]}`+"\n\n"...)
	}
	body = append(body, "data: [DONE]\n\n"...)
	// The whole answer in one read, a second after the request.
	mt.Write(body, t0.Add(time.Second))
	m := mt.Finish(t0.Add(time.Second), OutcomeUnknown, "")
	fmt.Println(m.OutputEvents, m.Buffered)
	// Output: 20 true
}

// BenchmarkOutputBurst is the rule's cost per output event.
func BenchmarkOutputBurst(b *testing.B) {
	var bu outputBurst
	b.ReportAllocs()
	for i := range b.N {
		bu.add(time.Duration(i) * time.Millisecond)
	}
	if bu.buffered(int64(b.N)) {
		b.Fatal("an even stream flagged")
	}
}
