package stats

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tokentap/tokentap/internal/meter"
	"github.com/tokentap/tokentap/internal/ratelimit"
)

// rateLimited is an Anthropic-style report: requests, input and output
// tokens, no combined token limit.
var rateLimited = ratelimit.Headers{Limits: [ratelimit.NumKinds]ratelimit.Limit{
	ratelimit.Requests:     {Limit: 1000, Remaining: 250, HasLimit: true, HasRemaining: true, Reset: 30 * time.Second, HasReset: true},
	ratelimit.InputTokens:  {Limit: 80000, Remaining: 60000, HasLimit: true, HasRemaining: true, Reset: time.Second, HasReset: true},
	ratelimit.OutputTokens: {Limit: 16000, Remaining: 4000, HasLimit: true, HasRemaining: true, Reset: 2 * time.Second, HasReset: true},
}}

func ptr[T any](v T) *T { return &v }

// TestHeadroom: a row keeps the latest report, its tokens the tighter of
// input and output where no combined limit is reported; a throttled
// answer with only a retry-after keeps the limits and adds the wait; a
// later report of limits clears it; throttled requests are counted apart
// from errors.
func TestHeadroom(t *testing.T) {
	openai := ratelimit.Headers{Limits: [ratelimit.NumKinds]ratelimit.Limit{
		ratelimit.Requests: {Limit: 60, Remaining: 59, HasLimit: true, HasRemaining: true, Reset: time.Second, HasReset: true},
		ratelimit.Tokens:   {Limit: 150000, Remaining: 149984, HasLimit: true, HasRemaining: true, Reset: 6 * time.Minute, HasReset: true},
	}}
	overloaded := ratelimit.Headers{RetryAfter: 5 * time.Second, HasRetryAfter: true}
	steps := []struct {
		name      string
		rl        *ratelimit.Headers
		outcome   meter.Outcome
		want      *RateLimitReport
		throttled int64
		errors    int64
	}{
		{
			name: "no headers: no rate_limit", outcome: meter.OutcomeCompleted,
		},
		{
			name: "anthropic: tokens are the tighter of input and output", rl: &rateLimited, outcome: meter.OutcomeCompleted,
			want: &RateLimitReport{ObservedAt: at(2 * time.Second),
				Requests: &RateLimitKind{RemainingShare: ptr(0.25), Remaining: ptr[int64](250), ResetSeconds: ptr(30.0)},
				Tokens:   &RateLimitKind{RemainingShare: ptr(0.25), Remaining: ptr[int64](4000), ResetSeconds: ptr(2.0)}},
		},
		{
			name: "overloaded: limits kept, the wait added", rl: &overloaded, outcome: meter.OutcomeThrottled, throttled: 1,
			want: &RateLimitReport{ObservedAt: at(3 * time.Second),
				Requests:          &RateLimitKind{RemainingShare: ptr(0.25), Remaining: ptr[int64](250), ResetSeconds: ptr(30.0)},
				Tokens:            &RateLimitKind{RemainingShare: ptr(0.25), Remaining: ptr[int64](4000), ResetSeconds: ptr(2.0)},
				RetryAfterSeconds: ptr(5.0)},
		},
		{
			name: "openai: replaces, the wait cleared", rl: &openai, outcome: meter.OutcomeUpstreamError, throttled: 1, errors: 1,
			want: &RateLimitReport{ObservedAt: at(4 * time.Second),
				Requests: &RateLimitKind{RemainingShare: ptr(0.983333), Remaining: ptr[int64](59), ResetSeconds: ptr(1.0)},
				Tokens:   &RateLimitKind{RemainingShare: ptr(0.999893), Remaining: ptr[int64](149984), ResetSeconds: ptr(360.0)}},
		},
	}
	s := newTestStore(0)
	k := key("anthropic", "claude")
	for i, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			m := measurement()
			m.Outcome = st.outcome
			smp := SampleOf(m)
			smp.RateLimit = st.rl
			s.Record(&k, &smp, at(time.Duration(i+1)*time.Second))
			rep := s.Aggregate(Window5m, at(5*time.Second)).Report(at(5 * time.Second))
			row := rep.Rows[0]
			if !reflect.DeepEqual(row.RateLimit, st.want) {
				got, _ := json.Marshal(row.RateLimit)
				want, _ := json.Marshal(st.want)
				t.Errorf("rate_limit = %s, want %s", got, want)
			}
			if row.Throttled != st.throttled || row.Errors != st.errors {
				t.Errorf("throttled, errors = %d, %d; want %d, %d", row.Throttled, row.Errors, st.throttled, st.errors)
			}
		})
	}
}

// TestHeadroomSnapshot: the throttled count and the rate limit survive a
// snapshot and a merge, where the later report wins; a snapshot from a
// tokentap that had neither still reads, and a malformed rate_limit is
// refused.
func TestHeadroomSnapshot(t *testing.T) {
	a, b := newTestStore(0), newTestStore(0)
	k := key("anthropic", "claude")
	smp := full(1)
	smp.Throttled, smp.RateLimit = true, &rateLimited
	a.Record(&k, &smp, at(time.Second))
	later := rateLimited
	later.Limits[ratelimit.Requests].Remaining = 100
	smp.RateLimit = &later
	b.Record(&k, &smp, at(2*time.Second))

	merged := newAggregate(Window5m)
	for _, s := range []*Store{a, b} {
		snap, err := s.Aggregate(Window5m, at(3*time.Second)).Snapshot(at(3 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		js, _ := json.Marshal(snap)
		back, err := ParseSnapshot(js)
		if err != nil {
			t.Fatal(err)
		}
		agg, err := back.Aggregate()
		if err != nil {
			t.Fatal(err)
		}
		if err := merged.Merge(agg); err != nil {
			t.Fatal(err)
		}
	}
	row := merged.Report(at(3 * time.Second)).Rows[0]
	if row.Throttled != 2 {
		t.Errorf("throttled = %d, want 2", row.Throttled)
	}
	if rl := row.RateLimit; rl == nil || !rl.ObservedAt.Equal(at(2*time.Second)) || *rl.Requests.Remaining != 100 {
		t.Errorf("rate_limit = %+v, want the later report's (remaining 100)", rl)
	}

	for _, tt := range []struct {
		name, row string
		ok        bool
	}{
		{"without throttled or rate_limit", `{"provider":"p","model":"m","labels":{},"overflow":false,"requests":1,"errors":0,"aborts":0,"estimated":0,"sketches":{}}`, true},
		{"share over 1", `{"provider":"p","model":"m","labels":{},"overflow":false,"requests":1,"sketches":{},"rate_limit":{"observed_at":"2026-12-02T15:00:00Z","requests":{"remaining_share":1.5}}}`, false},
		{"negative throttled", `{"provider":"p","model":"m","labels":{},"overflow":false,"requests":1,"throttled":-1,"sketches":{}}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc := `{"version":1,"window":"5m","window_seconds":300,"generated_at":"2026-12-02T15:00:00Z","relative_accuracy":0.01,"rows":[` + tt.row + `]}`
			snap, err := ParseSnapshot([]byte(doc))
			if err == nil {
				_, err = snap.Aggregate()
			}
			if (err == nil) != tt.ok {
				t.Errorf("err = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

// TestWriteTableRateLimit: THROTTLED% is always shown; RL_REQ%, RL_TOK%
// and RL_RESET appear when some row reported rate limits, "-" for a row
// that did not, the reset being the tighter limit's.
func TestWriteTableRateLimit(t *testing.T) {
	s := newTestStore(0)
	smp := only(OutputTokens, 300)
	smp.RateLimit = &rateLimited
	record(s, key("anthropic", "claude"), smp, time.Second)
	throttled := only(OutputTokens, 300)
	throttled.Throttled = true
	record(s, key("anthropic", "claude"), throttled, time.Second)
	record(s, key("openai", "gpt-b"), only(OutputTokens, 300), time.Second)
	now := at(2 * time.Second)
	o, _ := ParseTableSort("-rl_req%")
	var b strings.Builder
	if err := WriteTable(&b, s.Aggregate(Window1m, now).Report(now), o); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	col := map[string]int{}
	for i, h := range strings.Fields(lines[0]) {
		col[h] = i
	}
	// Requests 250 of 1000 reset in 30 s; tokens the tighter of input
	// (75 % left) and output (25 % left, reset in 2 s); equal shares
	// leave the requests' reset.
	want := map[string][4]string{"claude": {"50.0%", "25%", "25%", "30.00s"}, "gpt-b": {"0.0%", "-", "-", "-"}}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		got := [4]string{f[col["THROTTLED%"]], f[col["RL_REQ%"]], f[col["RL_TOK%"]], f[col["RL_RESET"]]}
		if got != want[f[col["MODEL"]]] {
			t.Errorf("%s: THROTTLED%%, RL_REQ%%, RL_TOK%%, RL_RESET = %v, want %v\n%s", f[col["MODEL"]], got, want[f[col["MODEL"]]], b.String())
		}
	}

	b.Reset()
	s = newTestStore(0)
	record(s, key("openai", "gpt-b"), only(OutputTokens, 300), time.Second)
	if err := WriteTable(&b, s.Aggregate(Window1m, now).Report(now), o); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "RL_") || !strings.Contains(b.String(), "THROTTLED%") {
		t.Errorf("want THROTTLED%% and no RL_ columns without a report:\n%s", b.String())
	}
}
