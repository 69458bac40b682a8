package loadgen

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/tokentap/tokentap/internal/meter/tokencount"
	"github.com/tokentap/tokentap/internal/simulator"
)

func o200k(t testing.TB) *tokencount.Counter {
	t.Helper()
	c, err := tokencount.New("o200k_base")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOutputText reads whole streams with the text kept: every kind of
// output is text, split wherever the deltas split it, and only a completed
// request with usage is counted.
func TestOutputText(t *testing.T) {
	c := o200k(t)
	openai := func(deltas ...string) string {
		var b strings.Builder
		for _, d := range deltas {
			b.WriteString("data: {\"choices\":[{\"delta\":" + d + "}]}\n\n")
		}
		return b.String()
	}
	const usage7 = "data: {\"choices\":[],\"usage\":{\"completion_tokens\":7}}\n\ndata: [DONE]\n\n"
	anthropic := func(deltas ...string) string {
		var b strings.Builder
		for _, d := range deltas {
			b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":" + d + "}\n\n")
		}
		return b.String()
	}
	const anthropicEnd = "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":7}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	for _, tc := range []struct {
		name    string
		api     API
		body    string
		text    string
		counted bool
	}{
		{name: "openai content split inside words", api: OpenAI,
			body: openai(`{"role":"assistant","content":""}`, `{"content":"Hel"}`, `{"content":"lo wor"}`, `{"content":"ld, tokenizers!"}`) + usage7,
			text: "Hello world, tokenizers!", counted: true},
		{name: "openai reasoning, refusal and content in one delta", api: OpenAI,
			body: openai(`{"reasoning_content":"think. ","refusal":"No. ","content":"Yes."}`) + usage7,
			text: "Yes.think. No. ", counted: true},
		{name: "openai tool-call arguments", api: OpenAI,
			body: openai(`{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"city\":"}}]}`, `{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`) + usage7,
			text: `{"city":"Paris"}`, counted: true},
		{name: "openai without usage is not counted", api: OpenAI,
			body: openai(`{"content":"Hello"}`) + "data: [DONE]\n\n", text: "Hello"},
		{name: "openai cut short is not counted", api: OpenAI,
			body: openai(`{"content":"Hello"}`), text: "Hello"},
		{name: "anthropic text, thinking and tool input", api: Anthropic,
			body: anthropic(`{"type":"thinking_delta","thinking":"Hmm. "}`, `{"type":"signature_delta","signature":"sig"}`,
				`{"type":"text_delta","text":"Hello"}`, `{"type":"input_json_delta","partial_json":"{\"a\":1}"}`) + anthropicEnd,
			text: `Hmm. Hello{"a":1}`, counted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{}
			r.keepText()
			r.read(context.Background(), tc.api, strings.NewReader(tc.body))
			if got := string(*r.text); got != tc.text {
				t.Errorf("text %q, want %q", got, tc.text)
			}
			r.countText(c)
			if r.text != nil {
				t.Error("the text buffer was not given back")
			}
			want := 0
			if tc.counted {
				want = int(c.Tokens([]byte(tc.text)))
			}
			if r.tokenized != tc.counted || r.TokenizerTokens != want {
				t.Errorf("counted %v, %d tokens; want %v, %d", r.tokenized, r.TokenizerTokens, tc.counted, want)
			}
		})
	}
}

// TestOutputTextCap: a text past the cap is dropped, not counted in part,
// and the check counts the request as cut.
func TestOutputTextCap(t *testing.T) {
	for _, tc := range []struct {
		name   string
		chunks []int // lengths appended
		cut    bool
	}{
		{name: "under the cap", chunks: []int{maxOutputText / 2, maxOutputText / 2}},
		{name: "one byte over", chunks: []int{maxOutputText / 2, maxOutputText/2 + 1}, cut: true},
		{name: "appends after the cut are dropped", chunks: []int{maxOutputText + 1, 3}, cut: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{UsageReported: true, OutputTokens: 1}
			r.keepText()
			want := 0
			for _, n := range tc.chunks {
				r.appendText(strings.Repeat("a", n))
				want += n
			}
			if tc.cut {
				want = 0
			}
			if r.OutputTextCut != tc.cut || len(*r.text) != want {
				t.Errorf("cut %v, %d bytes kept; want %v, %d", r.OutputTextCut, len(*r.text), tc.cut, want)
			}
			r.countText(o200k(t))
			var c usageCheck
			c.add(r)
			u := c.report()
			if u == nil || (u.Cut == 1) != tc.cut || (u.Requests == 1) == tc.cut {
				t.Errorf("check %+v, want the request cut: %v", u, tc.cut)
			}
		})
	}
}

// TestUsageCheck: sums, differing requests and the relative difference.
func TestUsageCheck(t *testing.T) {
	counted := func(reported, tokenizer int) *Result {
		return &Result{UsageReported: true, OutputTokens: reported, TokenizerTokens: tokenizer, tokenized: true}
	}
	for _, tc := range []struct {
		name    string
		results []*Result
		want    *UsageVsTokenizer
		diff    float64
	}{
		{name: "nothing counted", results: []*Result{{OutputTokens: 3}}, want: nil},
		{name: "agree", results: []*Result{counted(10, 10), counted(20, 20)},
			want: &UsageVsTokenizer{Requests: 2, ReportedTokens: 30, TokenizerTokens: 30}, diff: 0},
		{name: "tokenizer counts 3 % more", results: []*Result{counted(50, 50), counted(50, 53)},
			want: &UsageVsTokenizer{Requests: 2, Differing: 1, ReportedTokens: 100, TokenizerTokens: 103}, diff: 0.03},
		{name: "tokenizer counts fewer", results: []*Result{counted(40, 30)},
			want: &UsageVsTokenizer{Requests: 1, Differing: 1, ReportedTokens: 40, TokenizerTokens: 30}, diff: -0.25},
		{name: "nothing reported: no ratio", results: []*Result{counted(0, 2)},
			want: &UsageVsTokenizer{Requests: 1, Differing: 1, TokenizerTokens: 2}, diff: -1},
		{name: "failed requests are not counted", results: []*Result{counted(5, 5), {ErrorKind: ErrTimeout, OutputTextCut: true, UsageReported: true}},
			want: &UsageVsTokenizer{Requests: 1, ReportedTokens: 5, TokenizerTokens: 5}, diff: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c usageCheck
			for _, r := range tc.results {
				c.add(r)
			}
			got := c.report()
			if (got == nil) != (tc.want == nil) {
				t.Fatalf("report %+v, want %+v", got, tc.want)
			}
			if got == nil {
				return
			}
			d := got.Difference
			got.Difference = nil
			if *got != *tc.want {
				t.Errorf("report %+v, want %+v", *got, *tc.want)
			}
			switch {
			case tc.diff == -1 && d != nil:
				t.Errorf("difference %v, want none", *d)
			case tc.diff != -1 && (d == nil || *d < tc.diff-1e-12 || *d > tc.diff+1e-12):
				t.Errorf("difference %v, want %v", d, tc.diff)
			}
		})
	}
}

// TestUsageVsTokenizerSimulator: the simulator streams words that are one
// token each in o200k and reports their number as usage, so the two
// counts agree exactly, for both APIs; without usage or a tokenizer there
// is no comparison.
func TestUsageVsTokenizerSimulator(t *testing.T) {
	base := startSimulator(t, simulator.Handler{})
	for _, tc := range []struct {
		name      string
		cfg       Config
		requests  int // counted both ways, per model
		reported  int64
		tokenizer string // in the report
	}{
		{name: "openai", cfg: Config{Models: []string{"fast", "slow"}, Concurrency: 2, Requests: 6, Tokenizer: "o200k_base"},
			requests: 3, reported: 3 * tokens, tokenizer: "o200k_base"},
		{name: "anthropic, cl100k, capped", cfg: Config{API: Anthropic, Models: []string{"fast"}, Requests: 3, MaxTokens: 7, Tokenizer: "cl100k_base"},
			requests: 3, reported: 3 * 7, tokenizer: "cl100k_base"},
		{name: "no usage reported", cfg: Config{Models: []string{"fast"}, Requests: 2, Tokenizer: "o200k_base",
			Header: http.Header{simulator.HeaderUsage: {"never"}}}, tokenizer: "o200k_base"},
		{name: "no tokenizer", cfg: Config{Models: []string{"fast"}, Requests: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.URL = base
			if cfg.API == Anthropic {
				cfg.URL = base + "/v1"
			}
			rep, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Tokenizer != tc.tokenizer {
				t.Errorf("tokenizer %q, want %q", rep.Tokenizer, tc.tokenizer)
			}
			for _, m := range rep.Models {
				u := m.UsageVsTokenizer
				if tc.requests == 0 {
					if u != nil {
						t.Errorf("%s: %+v, want no comparison", m.Model, *u)
					}
					continue
				}
				want := UsageVsTokenizer{Requests: tc.requests, ReportedTokens: tc.reported, TokenizerTokens: tc.reported}
				if u == nil || u.Difference == nil || *u.Difference != 0 {
					t.Fatalf("%s: %+v, want %+v and a difference of 0", m.Model, u, want)
				}
				got := *u
				got.Difference = nil
				if got != want {
					t.Errorf("%s: %+v, want %+v", m.Model, got, want)
				}
			}
			var table strings.Builder
			if err := rep.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			if line := "usage vs " + tc.tokenizer + " tokenizer"; (tc.requests > 0) != strings.Contains(table.String(), line) {
				t.Errorf("table has %q: %v, want %v:\n%s", line, !(tc.requests > 0), tc.requests > 0, table.String())
			}
		})
	}
	if _, err := Run(context.Background(), Config{URL: base, Models: []string{"fast"}, Requests: 1, Tokenizer: "gpt2"}); err == nil ||
		!strings.Contains(err.Error(), `unknown token encoding "gpt2"`) {
		t.Errorf("an unknown tokenizer gave %v", err)
	}
}

// TestOutputTextAllocs: keeping and counting the text allocates nothing
// per request once the pool and the tokenizer's table are warm.
func TestOutputTextAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items at random")
	}
	var b strings.Builder
	for i := range 200 {
		b.WriteString("data: {\"choices\":[{\"delta\":{\"content\":\" " + simWords[i%len(simWords)] + "\"}}]}\n\n")
	}
	b.WriteString("data: {\"choices\":[],\"usage\":{\"completion_tokens\":200}}\n\ndata: [DONE]\n\n")
	body := b.String()
	c := o200k(t)
	read := func(keep bool) func() {
		return func() {
			r := &Result{}
			if keep {
				r.keepText()
			}
			r.read(context.Background(), OpenAI, strings.NewReader(body))
			r.countText(c)
		}
	}
	read(true)() // warms the tokenizer's table
	without := testing.AllocsPerRun(20, read(false))
	with := testing.AllocsPerRun(20, read(true))
	t.Logf("%.0f allocations per request with the text kept, %.0f without", with, without)
	if with > without {
		t.Errorf("%.0f allocations per request with the text kept, %.0f without", with, without)
	}
}

var simWords = strings.Fields("the of and to in is that for it as with was")

// TestReadAllocsPerEvent: the client parses each event in place, so that
// a stream's garbage does not grow with its length (a run's collections
// hold a core and make scheduled requests start late). What is left per
// request is its slices of gaps and delays, grown by doubling.
func TestReadAllocsPerEvent(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	for _, tc := range []struct {
		name  string
		api   API
		event func(i int) string
		end   string
	}{
		{
			name: "openai chat",
			api:  OpenAI,
			event: func(i int) string {
				return `data: {"id":"c1","model":"m","choices":[{"delta":{"content":" ` + simWords[i%len(simWords)] + `"}}]}` + "\n\n"
			},
			end: "data: {\"choices\":[],\"usage\":{\"completion_tokens\":9}}\n\ndata: [DONE]\n\n",
		},
		{
			name: "anthropic messages",
			api:  Anthropic,
			event: func(i int) string {
				return "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" " + simWords[i%len(simWords)] + "\"}}\n\n"
			},
			end: "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream := func(n int) string {
				var b strings.Builder
				for i := range n {
					b.WriteString(tc.event(i))
				}
				return b.String() + tc.end
			}
			allocs := func(body string) float64 {
				return testing.AllocsPerRun(20, func() {
					r := &Result{}
					r.read(context.Background(), tc.api, strings.NewReader(body))
					if r.ContentEvents == 0 {
						t.Fatal("no content event read")
					}
				})
			}
			short, long := allocs(stream(100)), allocs(stream(2000))
			t.Logf("%.0f allocations for 100 events, %.0f for 2,000", short, long)
			// 1,900 more events add a handful of slice doublings.
			if long-short > 19 {
				t.Errorf("%.0f allocations for 100 events, %.0f for 2,000: more than one per 100 events", short, long)
			}
		})
	}
}
