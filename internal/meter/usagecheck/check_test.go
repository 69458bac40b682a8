package usagecheck

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/meter/tokencount"
)

func TestEncodingFor(t *testing.T) {
	tests := []struct {
		model, want string
	}{
		{"gpt-4o", "o200k_base"},
		{"gpt-4o-2024-08-06", "o200k_base"},
		{"gpt-4o-mini", "o200k_base"},
		{"gpt-4.1-nano-2025-04-14", "o200k_base"},
		{"gpt-5", "o200k_base"},
		{"gpt-5.1", "o200k_base"},
		{"gpt-5-nano-2025-08-07", "o200k_base"},
		{"o1", "o200k_base"},
		{"o3-mini", "o200k_base"},
		{"o4-mini-2025-04-16", "o200k_base"},
		{"openai/gpt-4o", "o200k_base"},
		{"GPT-4o", "o200k_base"},
		{"gpt-4", "cl100k_base"},
		{"gpt-4-turbo", "cl100k_base"},
		{"gpt-3.5-turbo-0125", "cl100k_base"},
		{"gpt-35-turbo", "cl100k_base"},
		{"gpt-4.2", ""},
		{"gpt-4ox", ""},
		{"o1x", ""},
		{"llama-3.3-70b", ""},
		{"claude-haiku-4-5", ""},
		{"gpt-oss-20b", ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			got, ok := EncodingFor(tt.model)
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("EncodingFor(%q) = %q, %v; want %q", tt.model, got, ok, tt.want)
			}
		})
	}
	for _, e := range Encodings() {
		if _, err := tokencount.New(e); err != nil {
			t.Errorf("the table names an encoding tokencount lacks: %v", err)
		}
	}
}

// chatStream is a Chat Completions stream of model: the text's words as
// deltas, then usage with output tokens reported (and reasoning hidden).
func chatStream(model string, words []string, extra string, reported, reasoning int64) string {
	var b strings.Builder
	for _, w := range words {
		fmt.Fprintf(&b, "data: {\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", model, w)
	}
	b.WriteString(extra)
	fmt.Fprintf(&b, "data: {\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", model)
	fmt.Fprintf(&b, "data: {\"model\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":%d,\"completion_tokens_details\":{\"reasoning_tokens\":%d}}}\n\n", model, reported, reasoning)
	b.WriteString("data: [DONE]\n\n")
	return b.String()
}

// check measures body with a Checker started when sampled says so.
func check(t *testing.T, v *Verifier, body string) (*meter.Measurement, Result) {
	t.Helper()
	d, _ := meter.LookupDialect("openai_chat")
	start := time.Unix(1e9, 0)
	var mt meter.Meter
	mt.Init(d.New(), meter.Options{}, start)
	mt.Request("/v1/chat/completions", []byte(`{"model":"gpt-4o","stream":true}`), false)
	var c Checker
	if v.Sample() {
		c.Start(v, &mt.M, nil)
		mt.SetTextSink(&c)
	}
	mt.Response(200, "text/event-stream", "")
	mt.Write([]byte(body), start.Add(time.Millisecond))
	m := mt.Finish(start.Add(2*time.Millisecond), meter.OutcomeUnknown, "")
	model := m.ResponseModel
	if model == "" {
		model = m.Request.Model
	}
	return m, c.Result(m, model)
}

func TestCheck(t *testing.T) {
	// Long enough that the slack is a small part of its count.
	words := strings.Fields(strings.Repeat("The median and the tail tell different stories under real load. ", 5))
	for i := 1; i < len(words); i++ {
		words[i] = " " + words[i]
	}
	o200k, _ := tokencount.New("o200k_base")
	n := o200k.Tokens([]byte(strings.Join(words, "")))
	all, err := New(1)
	if err != nil {
		t.Fatal(err)
	}
	tool := `data: {"model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]}}]}` + "\n\n"
	shown := `data: {"model":"gpt-4o","choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}` + "\n\n"
	tests := []struct {
		name     string
		v        *Verifier
		body     string
		status   Status
		reason   string
		counted  int64
		mismatch bool
	}{
		{name: "off", v: nil, body: chatStream("gpt-4o", words, "", n, 0), status: NotSampled},
		{name: "share 1, known model, honest count", v: all, body: chatStream("gpt-4o", words, "", n, 0), status: Verified, counted: n},
		{name: "the count within the slack", v: all, body: chatStream("gpt-4o", words, "", n+Slack, 0), status: Verified, counted: n},
		{name: "the upstream doubles its count", v: all, body: chatStream("gpt-4o", words, "", 2*n+Slack, 0), status: Verified, counted: n, mismatch: true},
		{name: "the upstream counts nothing", v: all, body: chatStream("gpt-4o", words, "", 0, 0), status: Verified, counted: n, mismatch: true},
		{name: "hidden reasoning is taken off the reported count", v: all, body: chatStream("gpt-5-mini", words, "", n+500, 500), status: Verified, counted: n},
		{name: "hidden reasoning the count leaves in is a mismatch", v: all, body: chatStream("gpt-5-mini", words, "", n+500, 0), status: Verified, counted: n, mismatch: true},
		{name: "cl100k model", v: all, body: chatStream("gpt-4-turbo", words, "", n, 0), status: Verified, counted: n},
		{name: "unknown model", v: all, body: chatStream("llama-3.3-70b", words, "", 3*n, 0), status: Unverifiable, reason: ReasonNoTokenizer},
		{name: "tool calls", v: all, body: chatStream("gpt-4o", words, tool, 3*n, 0), status: Unverifiable, reason: ReasonToolCalls},
		{name: "shown reasoning", v: all, body: chatStream("gpt-4o", words, shown, 3*n, 0), status: Unverifiable, reason: ReasonReasoningText},
		{name: "no text", v: all, body: chatStream("gpt-4o", nil, "", 3, 0), status: Unverifiable, reason: ReasonNoText},
		{name: "no usage", v: all, body: strings.Split(chatStream("gpt-4o", words, "", n, 0), "data: {\"model\":\"gpt-4o\",\"choices\":[],")[0] + "data: [DONE]\n\n", status: Unverifiable, reason: ReasonNoUsage},
		{name: "truncated", v: all, body: strings.TrimSuffix(chatStream("gpt-4o", words, "", n, 0), "data: [DONE]\n\n"), status: Unverifiable, reason: ReasonIncomplete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, r := check(t, tt.v, tt.body)
			if r.Status != tt.status || r.Reason != tt.reason {
				t.Fatalf("status %s (%q), want %s (%q)", r.Status, r.Reason, tt.status, tt.reason)
			}
			if r.Status == Verified && (r.Counted != tt.counted || r.Mismatch != tt.mismatch) {
				t.Errorf("counted %d, mismatch %v (reported %d); want %d, %v", r.Counted, r.Mismatch, r.Reported, tt.counted, tt.mismatch)
			}
		})
	}
}

// TestSampleShare checks that a share samples about that share, and the
// bounds of New.
func TestSampleShare(t *testing.T) {
	for _, bad := range []float64{-0.1, 1.5} {
		if _, err := New(bad); err == nil {
			t.Errorf("New(%v) took a share outside (0, 1]", bad)
		}
	}
	if v, err := New(0); v != nil || err != nil {
		t.Errorf("New(0) = %v, %v; want off", v, err)
	}
	v, err := New(0.25)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	hits := 0
	for range n {
		if v.Sample() {
			hits++
		}
	}
	// Binomial(20000, 0.25): sd 61; 6 sd either way.
	if hits < n/4-370 || hits > n/4+370 {
		t.Errorf("share 0.25 sampled %d of %d", hits, n)
	}
}

// TestCheckerPassesTextOn checks that content capture, behind the
// checker, still gets every fragment.
func TestCheckerPassesTextOn(t *testing.T) {
	v, _ := New(1)
	var rec recorder
	var c Checker
	var m meter.Measurement
	m.ResponseModel = "gpt-4o"
	c.Start(v, &m, &rec)
	c.Text(0, 0, meter.TextAnswer, `"Hello"`)
	c.Text(0, 1, meter.TextToolCallName, `"f"`)
	if rec.n != 2 {
		t.Errorf("next got %d fragments, want 2", rec.n)
	}
}

type recorder struct{ n int }

func (r *recorder) Text(int, int, meter.TextKind, string) { r.n++ }
