package loadgen

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestEndpointURL(t *testing.T) {
	for _, tc := range []struct {
		name, url string
		api       API
		want      string
	}{
		{name: "openai base as the SDK takes it", url: "https://api.openai.com/v1", api: OpenAI, want: "https://api.openai.com/v1/chat/completions"},
		{name: "openai base with a slash", url: "http://localhost:8080/openai/v1/", api: OpenAI, want: "http://localhost:8080/openai/v1/chat/completions"},
		{name: "openai full endpoint", url: "http://localhost:8000/v1/chat/completions", api: OpenAI, want: "http://localhost:8000/v1/chat/completions"},
		{name: "openai query kept (Azure api-version)", url: "https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21", api: OpenAI,
			want: "https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21"},
		{name: "anthropic host as the SDK takes it", url: "https://api.anthropic.com", api: Anthropic, want: "https://api.anthropic.com/v1/messages"},
		{name: "anthropic base ending in v1", url: "http://localhost:8080/anthropic/v1", api: Anthropic, want: "http://localhost:8080/anthropic/v1/messages"},
		{name: "anthropic full endpoint", url: "http://localhost:8080/anthropic/v1/messages", api: Anthropic, want: "http://localhost:8080/anthropic/v1/messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := endpointURL(tc.url, tc.api)
			if err != nil || got != tc.want {
				t.Errorf("endpointURL(%q, %s) = %q, %v; want %q", tc.url, tc.api, got, err, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	valid := Config{URL: "http://127.0.0.1:9360", Models: []string{"m"}, Requests: 1}
	for _, tc := range []struct {
		name    string
		edit    func(*Config)
		wantErr string // "" for a valid config
		check   func(t *testing.T, c Config)
	}{
		{name: "defaults", edit: func(*Config) {}, check: func(t *testing.T, c Config) {
			if c.API != OpenAI || c.Concurrency != 1 || c.Timeout != DefaultTimeout || len(c.Prompts) != 1 || c.Prompts[0] != DefaultPrompt {
				t.Errorf("defaults: api %q, concurrency %d, timeout %v, prompts %q", c.API, c.Concurrency, c.Timeout, c.Prompts)
			}
		}},
		{name: "rate caps in-flight by default", edit: func(c *Config) { c.Rate = 10 }, check: func(t *testing.T, c Config) {
			if c.Concurrency != DefaultRateInFlight {
				t.Errorf("concurrency %d, want %d", c.Concurrency, DefaultRateInFlight)
			}
		}},
		{name: "duration alone bounds", edit: func(c *Config) { c.Requests, c.Duration = 0, time.Second }},
		{name: "unbounded", edit: func(c *Config) { c.Requests = 0 }, wantErr: "needs a bound"},
		{name: "no URL", edit: func(c *Config) { c.URL = "" }, wantErr: "URL is required"},
		{name: "not http", edit: func(c *Config) { c.URL = "ftp://host/v1" }, wantErr: "http or https"},
		{name: "no host", edit: func(c *Config) { c.URL = "http:///v1" }, wantErr: "with a host"},
		{name: "unknown api", edit: func(c *Config) { c.API = "gemini" }, wantErr: `got "gemini"`},
		{name: "no model", edit: func(c *Config) { c.Models = nil }, wantErr: "at least one model"},
		{name: "empty model", edit: func(c *Config) { c.Models = []string{"a", " "} }, wantErr: "model name is empty"},
		{name: "negative concurrency", edit: func(c *Config) { c.Concurrency = -1 }, wantErr: "concurrency"},
		{name: "NaN rate", edit: func(c *Config) { c.Rate = math.NaN() }, wantErr: "rate"},
		{name: "negative rate", edit: func(c *Config) { c.Rate = -1 }, wantErr: "rate"},
		{name: "negative requests", edit: func(c *Config) { c.Requests = -1 }, wantErr: "requests must not be negative"},
		{name: "negative duration", edit: func(c *Config) { c.Duration = -time.Second }, wantErr: "duration"},
		{name: "negative timeout", edit: func(c *Config) { c.Timeout = -time.Second }, wantErr: "timeout"},
		{name: "negative max tokens", edit: func(c *Config) { c.MaxTokens = -1 }, wantErr: "max tokens"},
		{name: "every error at once", edit: func(c *Config) { c.URL, c.Models = "", nil }, wantErr: "URL is required\nat least one model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.edit(&c)
			got, err := c.validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if tc.check != nil {
					tc.check(t, got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestPromptOrder checks that every model gets the prompts in the same
// order, even when the counts share a factor (2 models, 2 prompts would
// otherwise pair each model with one prompt).
func TestPromptOrder(t *testing.T) {
	c := Config{Models: []string{"a", "b"}, Prompts: []string{"p0", "p1"}}
	var got []string
	for seq := range 8 {
		got = append(got, c.model(seq)+":"+c.prompt(seq))
	}
	want := "a:p0 b:p0 a:p1 b:p1 a:p0 b:p0 a:p1 b:p1"
	if strings.Join(got, " ") != want {
		t.Errorf("got %s\nwant %s", strings.Join(got, " "), want)
	}
	c.Prompt = func(seq int) string { return "unique " + string(rune('0'+seq)) }
	if p := c.prompt(3); p != "unique 3" {
		t.Errorf("Prompt func ignored: %q", p)
	}
}

func TestRequestBody(t *testing.T) {
	for _, tc := range []struct {
		name      string
		api       API
		maxTokens int
		want      string
	}{
		{name: "openai", api: OpenAI, want: `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"say \"hi\"\n"}]}`},
		{name: "openai capped", api: OpenAI, maxTokens: 7, want: `{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":7,"messages":[{"role":"user","content":"say \"hi\"\n"}]}`},
		{name: "anthropic default cap", api: Anthropic, want: `{"model":"m","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"say \"hi\"\n"}]}`},
		{name: "anthropic capped", api: Anthropic, maxTokens: 7, want: `{"model":"m","max_tokens":7,"stream":true,"messages":[{"role":"user","content":"say \"hi\"\n"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(requestBody(tc.api, "m", "say \"hi\"\n", tc.maxTokens)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
