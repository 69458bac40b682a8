package probe

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"time"
)

// The APIs a probe speaks: the streaming request of each is package
// loadgen's.
const (
	// OpenAI is Chat Completions (POST …/chat/completions), streamed with
	// stream_options.include_usage.
	OpenAI = "openai"
	// Anthropic is Messages (POST …/v1/messages).
	Anthropic = "anthropic"
)

// Bounds and defaults. A probe is a measurement, not load: it asks for a
// few tokens, at most once a second per target, and is never queued.
const (
	// MinInterval is the shortest interval between two probes of a target.
	MinInterval = time.Second
	// DefaultInterval is the interval when none is given: a minute keeps a
	// quiet model's five-minute window populated for the price of a few
	// dozen tokens.
	DefaultInterval = time.Minute
	// DefaultMaxTokens is the output cap asked for when none is given:
	// enough for a time to first token and a decode rate.
	DefaultMaxTokens = 16
	// MaxTokensLimit is the largest output cap a probe may ask for, so that
	// a typo cannot turn probes into a bill (reasoning models may need more
	// than the default before their first visible token).
	MaxTokensLimit = 256
	// DefaultTimeout bounds a probe when no timeout is given.
	DefaultTimeout = 30 * time.Second
	// MaxTimeout is the longest timeout a probe may have.
	MaxTimeout = 5 * time.Minute
	// MaxPromptBytes bounds the prompt, and with it the input tokens.
	MaxPromptBytes = 4096
	// MaxTargets bounds the targets of one prober.
	MaxTargets = 64
	// DefaultPrompt asks for more output than the default cap allows, so
	// that a probe streams until max_tokens and its decode rate is measured
	// over all of them.
	DefaultPrompt = "Count from 1 to 100, one number per line."
)

// Target is one route and model to probe.
type Target struct {
	// Name identifies the target in logs and counters; unique in a prober.
	Name string
	// URL is the endpoint on tokentap's own route: the API's full path
	// (…/chat/completions, …/v1/messages) or a base URL as the SDKs take
	// it (…/openai/v1), which the API's path is appended to.
	URL string
	// API is OpenAI (the default) or Anthropic.
	API string
	// Model is the model asked for.
	Model string
	// Header is added to the request (credentials, routing), after the
	// API's own headers; Header (the probe header) may not be set.
	Header http.Header
	// MaxTokens is the output cap (default DefaultMaxTokens, at most
	// MaxTokensLimit).
	MaxTokens int
	// Prompt is the user message (default DefaultPrompt, at most
	// MaxPromptBytes).
	Prompt string
	// Interval is the time between two probes (default DefaultInterval,
	// at least MinInterval).
	Interval time.Duration
	// Timeout bounds one probe, from sending it to the end of its stream
	// (default DefaultTimeout, at most MaxTimeout).
	Timeout time.Duration
}

// CheckInterval reports an interval outside the bounds; zero means the
// default.
func CheckInterval(d time.Duration) error {
	if d != 0 && d < MinInterval {
		return fmt.Errorf("interval must be at least %s, got %s", MinInterval, d)
	}
	return nil
}

// CheckTimeout reports a timeout outside the bounds; zero means the
// default.
func CheckTimeout(d time.Duration) error {
	if d < 0 || d > MaxTimeout {
		return fmt.Errorf("timeout must be between 0 (the default, %s) and %s, got %s", DefaultTimeout, MaxTimeout, d)
	}
	return nil
}

// CheckMaxTokens reports an output cap outside the bounds; zero means the
// default.
func CheckMaxTokens(n int) error {
	if n < 0 || n > MaxTokensLimit {
		return fmt.Errorf("max_tokens must be between 1 and %d (0: the default, %d), got %d", MaxTokensLimit, DefaultMaxTokens, n)
	}
	return nil
}

// CheckPrompt reports a prompt over the bound; empty means the default.
func CheckPrompt(p string) error {
	if len(p) > MaxPromptBytes {
		return fmt.Errorf("prompt must be at most %d bytes, got %d", MaxPromptBytes, len(p))
	}
	return nil
}

// CheckAPI reports an API a probe does not speak; empty means OpenAI.
func CheckAPI(api string) error {
	switch api {
	case "", OpenAI, Anthropic:
		return nil
	}
	return fmt.Errorf("api must be %q or %q, got %q", OpenAI, Anthropic, api)
}

// normalize checks t and fills in its defaults. Errors name the field, not
// the target: the caller adds which target it is.
func (t *Target) normalize() error {
	var errs []error
	if strings.TrimSpace(t.Name) == "" {
		errs = append(errs, errors.New("a name is required"))
	}
	if strings.TrimSpace(t.Model) == "" {
		errs = append(errs, errors.New("a model is required"))
	}
	if err := checkURL(t.URL); err != nil {
		errs = append(errs, err)
	}
	if err := CheckAPI(t.API); err != nil {
		errs = append(errs, err)
	}
	if t.API == "" {
		t.API = OpenAI
	}
	for k := range t.Header {
		if textproto.CanonicalMIMEHeaderKey(k) == Header {
			errs = append(errs, fmt.Errorf("header %s is the probe's own and may not be set", Header))
		}
	}
	errs = append(errs, CheckInterval(t.Interval), CheckTimeout(t.Timeout), CheckMaxTokens(t.MaxTokens), CheckPrompt(t.Prompt))
	if t.Interval == 0 {
		t.Interval = DefaultInterval
	}
	if t.Timeout == 0 {
		t.Timeout = DefaultTimeout
	}
	if t.MaxTokens == 0 {
		t.MaxTokens = DefaultMaxTokens
	}
	if t.Prompt == "" {
		t.Prompt = DefaultPrompt
	}
	return errors.Join(errs...)
}

// checkURL accepts what loadgen accepts: an http or https URL with a host.
func checkURL(raw string) error {
	if raw == "" {
		return errors.New("a URL is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("url must be an http or https URL with a host, got %q", u.Redacted())
	}
	return nil
}
