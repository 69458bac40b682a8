package simulator

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// TestPlanUnderLoad: a model's prefill rate lengthens its time to first
// token by its prompt's length, and its batch slowdown slows it by the
// requests in flight to it, as package speed's curve says; without either
// the profile is untouched.
func TestPlanUnderLoad(t *testing.T) {
	prompt := strings.Repeat("word ", 4000) // 20,000 bytes: 5,000 tokens
	body := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"` + prompt + `"}]}`)
	tests := []struct {
		name     string
		model    Profile
		inflight int
		ttft     time.Duration
		rate     float64
	}{
		{"neither", Profile{TimeToFirstToken: caddy.Duration(100 * time.Millisecond), TokensPerSecond: 40}, 5, 100 * time.Millisecond, 40},
		{"prefill", Profile{TimeToFirstToken: caddy.Duration(100 * time.Millisecond), TokensPerSecond: 40, PrefillTokensPerSecond: 10000}, 1, 600 * time.Millisecond, 40},
		{"five in flight", Profile{TimeToFirstToken: caddy.Duration(100 * time.Millisecond), TokensPerSecond: 40, BatchSlowdown: 0.25}, 5, 200 * time.Millisecond, 20},
		{"both", Profile{TimeToFirstToken: caddy.Duration(100 * time.Millisecond), TokensPerSecond: 40, BatchSlowdown: 0.25, PrefillTokensPerSecond: 10000}, 5, 1200 * time.Millisecond, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &Handler{Models: map[string]Profile{"m": tt.model}}
			l := new(load)
			for range tt.inflight - 1 {
				l.enter("m")
			}
			u, f := mustFormat(t, "/v1/chat/completions")
			p, err := h.plan(f, u, body, overrides{}, l)
			if err != nil {
				t.Fatal(err)
			}
			if p.PromptTokens != 5000 {
				t.Fatalf("%d prompt tokens, want 5000", p.PromptTokens)
			}
			if got := time.Duration(p.Profile.TimeToFirstToken); got != tt.ttft || p.Profile.TokensPerSecond != tt.rate {
				t.Errorf("time to first token %s, rate %v; want %s, %v", got, p.Profile.TokensPerSecond, tt.ttft, tt.rate)
			}
			if p.Offsets[0] != tt.ttft {
				t.Errorf("first token at %s, want %s", p.Offsets[0], tt.ttft)
			}
			if n := l.enter("m"); n != tt.inflight+1 {
				t.Errorf("the plan left %d in flight, want %d", n-1, tt.inflight)
			}
		})
	}
}

// TestLoadCounts: requests in flight per model, and no entry left for a
// model with none.
func TestLoadCounts(t *testing.T) {
	var l load
	if n := l.enter("a"); n != 1 {
		t.Fatalf("first request: %d in flight", n)
	}
	l.enter("b")
	if n := l.enter("a"); n != 2 {
		t.Fatalf("second request to a: %d in flight", n)
	}
	l.exit("a")
	l.exit("a")
	l.exit("b")
	if len(l.inflight) != 0 {
		t.Errorf("entries left: %v", l.inflight)
	}
}

func mustFormat(t *testing.T, target string) (*url.URL, format) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	f := formatFor(u)
	if f == nil {
		t.Fatalf("no format for %s", target)
	}
	return u, f
}
