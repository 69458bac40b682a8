package probe

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func validTarget() Target {
	return Target{Name: "a", URL: "http://localhost:8080/openai/v1", Model: "gpt-4o-mini"}
}

func TestNewDefaults(t *testing.T) {
	p, err := New([]Target{validTarget()}, Options{Send: nopSend})
	if err != nil {
		t.Fatal(err)
	}
	got := p.Targets()[0]
	if got.API != OpenAI || got.Interval != DefaultInterval || got.Timeout != DefaultTimeout ||
		got.MaxTokens != DefaultMaxTokens || got.Prompt != DefaultPrompt {
		t.Errorf("defaults: %+v", got)
	}
	if v := got.Header.Get(Header); v != Token() {
		t.Errorf("probe header %q, want the process token", v)
	}
}

func TestNewKeepsCallerHeader(t *testing.T) {
	tgt := validTarget()
	tgt.Header = http.Header{"Authorization": {"Bearer k"}}
	p, err := New([]Target{tgt}, Options{Send: nopSend})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tgt.Header[Header]; ok {
		t.Error("New wrote the probe header into the caller's map")
	}
	if got := p.Targets()[0].Header.Get("Authorization"); got != "Bearer k" {
		t.Errorf("Authorization %q", got)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Target)
		want   string
	}{
		{"no name", func(t *Target) { t.Name = " " }, "a name is required"},
		{"no model", func(t *Target) { t.Model = "" }, "a model is required"},
		{"no URL", func(t *Target) { t.URL = "" }, "a URL is required"},
		{"URL without scheme", func(t *Target) { t.URL = "localhost:8080/v1" }, "url must be an http or https URL with a host"},
		{"URL of another scheme", func(t *Target) { t.URL = "ftp://localhost/v1" }, "url must be an http or https URL"},
		{"URL that does not parse", func(t *Target) { t.URL = "http://[::1" }, "url:"},
		{"unknown API", func(t *Target) { t.API = "gemini" }, `api must be "openai" or "anthropic", got "gemini"`},
		{"interval under a second", func(t *Target) { t.Interval = 999 * time.Millisecond }, "interval must be at least 1s, got 999ms"},
		{"negative interval", func(t *Target) { t.Interval = -time.Second }, "interval must be at least 1s"},
		{"negative timeout", func(t *Target) { t.Timeout = -time.Second }, "timeout must be between 0"},
		{"timeout over the bound", func(t *Target) { t.Timeout = MaxTimeout + time.Second }, "timeout must be between 0 (the default, 30s) and 5m0s, got 5m1s"},
		{"max_tokens over the bound", func(t *Target) { t.MaxTokens = 257 }, "max_tokens must be between 1 and 256"},
		{"negative max_tokens", func(t *Target) { t.MaxTokens = -1 }, "max_tokens must be between 1 and 256"},
		{"prompt over the bound", func(t *Target) { t.Prompt = strings.Repeat("x", MaxPromptBytes+1) }, "prompt must be at most 4096 bytes"},
		{"probe header set", func(t *Target) { t.Header = http.Header{"tokentap-probe": {"x"}} }, "header Tokentap-Probe is the probe's own"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tgt := validTarget()
			tt.change(&tgt)
			_, err := New([]Target{tgt}, Options{Send: nopSend})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), "target 0") {
				t.Errorf("error %v does not say which target", err)
			}
			sameAsCheck(t, []Target{tgt}, err)
		})
	}
}

func TestNewBounds(t *testing.T) {
	tests := []struct {
		name    string
		targets func() []Target
		want    string
	}{
		{"duplicate name", func() []Target { return []Target{validTarget(), validTarget()} }, `target 1: the name "a" is taken`},
		{"too many targets", func() []Target { return make([]Target, MaxTargets+1) }, "at most 64 targets, got 65"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.targets(), Options{Send: nopSend})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			sameAsCheck(t, tt.targets(), err)
		})
	}
}

func TestBoundsAccepted(t *testing.T) {
	tgt := validTarget()
	tgt.API, tgt.URL = Anthropic, "https://localhost/anthropic"
	tgt.Interval, tgt.Timeout, tgt.MaxTokens = MinInterval, MaxTimeout, MaxTokensLimit
	tgt.Prompt = strings.Repeat("x", MaxPromptBytes)
	if _, err := New([]Target{tgt}, Options{Send: nopSend}); err != nil {
		t.Fatal(err)
	}
	sameAsCheck(t, []Target{tgt}, nil)
}

// sameAsCheck fails unless Check refuses targets with New's error, or
// accepts them as New did: the Caddy app checks with one and builds with
// the other.
func sameAsCheck(t *testing.T, targets []Target, newErr error) {
	t.Helper()
	err := Check(targets)
	if (err == nil) != (newErr == nil) || (err != nil && err.Error() != newErr.Error()) {
		t.Errorf("Check: %v; New: %v", err, newErr)
	}
}
