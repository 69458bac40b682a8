package loadgen

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tokentap/tokentap/internal/meter/tokencount"
)

// API is the wire format the load generator speaks.
type API string

// The supported APIs.
const (
	// OpenAI is Chat Completions: POST {base}/chat/completions, streamed
	// with stream_options.include_usage so that the server reports the
	// output token count.
	OpenAI API = "openai"
	// Anthropic is Messages: POST {base}/v1/messages with the
	// anthropic-version header.
	Anthropic API = "anthropic"
)

// Defaults for the fields of Config left zero.
const (
	// DefaultPrompt is sent when no prompt is given: long enough that a
	// real model answers with a few hundred tokens.
	DefaultPrompt = "Write a short story about a lighthouse keeper who finds a message in a bottle."

	// DefaultTimeout bounds one request, from sending it to the end of its
	// stream: long generations take minutes, and a stuck stream must not
	// hold a run forever.
	DefaultTimeout = 5 * time.Minute

	// DefaultAnthropicMaxTokens is sent as max_tokens, which the Messages
	// API requires, when MaxTokens is zero.
	DefaultAnthropicMaxTokens = 1024

	// DefaultRateInFlight caps the requests in flight in rate mode when
	// Concurrency is zero: an endpoint slower than the rate would
	// otherwise make the run open connections without limit.
	DefaultRateInFlight = 256

	// AnthropicVersion is the anthropic-version header sent unless the
	// caller's headers set one.
	AnthropicVersion = "2023-06-01"
)

// Config is one load run.
type Config struct {
	// URL is the endpoint: the full URL of the API's path
	// (…/chat/completions, …/v1/messages) or a base URL as the SDKs take
	// it (OpenAI's base ends in /v1; Anthropic's is the host), which the
	// API's path is appended to.
	URL string

	// API is the wire format; empty means OpenAI.
	API API

	// Models are the models to request, in turn: request i asks for
	// Models[i % len(Models)], so that every model sees the same
	// conditions over the run. At least one is required.
	Models []string

	// Concurrency is, without Rate, the number of clients that each send
	// a request as soon as their previous one ended (closed loop). With
	// Rate, it caps the requests in flight (default DefaultRateInFlight).
	Concurrency int

	// Rate, if not zero, starts requests at this many per second on a
	// fixed schedule (open loop), whatever the answers' speed.
	Rate float64

	// Arrival spaces rate-mode requests: constant (the default) or
	// poisson; Burstiness shapes poisson gaps (default 1: exponential);
	// Seed makes the draws, so a run can be repeated exactly.
	Arrival    Arrival
	Burstiness float64
	Seed       uint64

	// SLO, if set, is the objective the report's goodput holds each
	// request to.
	SLO SLO

	// Warmup requests are sent first and not counted in the report: they
	// open connections and warm caches. They are on top of Requests.
	Warmup int

	// Requests bounds the number of requests started, warm-up left out;
	// zero means no bound on the count (Duration must then be set).
	Requests int

	// Duration bounds the time during which requests are started; zero
	// means no time bound (Requests must then be set). Requests in flight
	// when it ends run to their end, each bounded by Timeout.
	Duration time.Duration

	// Timeout bounds one request; zero means DefaultTimeout.
	Timeout time.Duration

	// Prompts are the user messages, used in turn (every model gets them
	// in the same order); empty means DefaultPrompt.
	Prompts []string

	// Prompt, if set, makes the prompt of request seq instead of Prompts:
	// benchmarks use it to make every request body unique.
	Prompt func(seq int) string

	// MaxTokens is the output cap sent with each request
	// (max_completion_tokens for OpenAI, max_tokens for Anthropic); zero
	// sends none for OpenAI and DefaultAnthropicMaxTokens for Anthropic.
	MaxTokens int

	// Header is added to every request (authentication, routing, the
	// simulator's Tokentap-Sim-* headers); it overrides the defaults.
	Header http.Header

	// Client sends the requests; nil means a client with a connection
	// pool as large as the concurrency and no response compression (so
	// that each event is timed when it arrives, not when a decompressor
	// releases it).
	Client *http.Client

	// Schedule, if set, replays a recording: request i starts at
	// Schedule[i].At from the run's start, with its prompt and output
	// cap, whatever became of the earlier ones (at most Concurrency in
	// flight, default DefaultRateInFlight). Requests defaults to, and may
	// not exceed, len(Schedule); Rate and Warmup do not apply.
	Schedule []Planned

	// Tokenizer, if set, is the encoding ("o200k_base" or "cl100k_base")
	// in which the output text of each completed request with usage
	// reported is counted, for the report's usage_vs_tokenizer; empty
	// counts nothing and keeps no text.
	Tokenizer string
	counter   *tokencount.Counter

	// OnResult, if set, is called with every finished request, from the
	// goroutine that ran it (so possibly concurrently), before the
	// request is counted in the report. The Result is the callee's to keep.
	OnResult func(*Result)
}

// validate checks cfg and returns it with its defaults filled in and the
// endpoint resolved.
func (cfg Config) validate() (Config, error) {
	var errs []error
	if cfg.API == "" {
		cfg.API = OpenAI
	}
	if cfg.API != OpenAI && cfg.API != Anthropic {
		errs = append(errs, fmt.Errorf("api must be %q or %q, got %q", OpenAI, Anthropic, cfg.API))
	}
	endpoint, err := endpointURL(cfg.URL, cfg.API)
	if err != nil {
		errs = append(errs, err)
	}
	cfg.URL = endpoint
	if len(cfg.Models) == 0 {
		errs = append(errs, errors.New("at least one model is required"))
	}
	for _, m := range cfg.Models {
		if strings.TrimSpace(m) == "" {
			errs = append(errs, errors.New("a model name is empty"))
			break
		}
	}
	if cfg.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("concurrency must not be negative, got %d", cfg.Concurrency))
	}
	if math.IsNaN(cfg.Rate) || math.IsInf(cfg.Rate, 0) || cfg.Rate < 0 {
		errs = append(errs, fmt.Errorf("rate must be a positive number of requests per second, got %v", cfg.Rate))
	}
	if cfg.Rate == 0 && len(cfg.Schedule) == 0 && cfg.Concurrency == 0 {
		cfg.Concurrency = 1
	}
	if len(cfg.Schedule) > 0 {
		if err := cfg.validateSchedule(); err != nil {
			errs = append(errs, err)
		}
	}
	if (cfg.Rate > 0 || len(cfg.Schedule) > 0) && cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultRateInFlight
	}
	if cfg.Requests < 0 {
		errs = append(errs, fmt.Errorf("requests must not be negative, got %d", cfg.Requests))
	}
	if cfg.Duration < 0 {
		errs = append(errs, fmt.Errorf("duration must not be negative, got %s", cfg.Duration))
	}
	if cfg.Requests == 0 && cfg.Duration == 0 {
		errs = append(errs, errors.New("a run needs a bound: a number of requests, a duration or both"))
	}
	if cfg.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout must not be negative, got %s", cfg.Timeout))
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if err := cfg.validateArrival(); err != nil {
		errs = append(errs, err)
	}
	if cfg.MaxTokens < 0 {
		errs = append(errs, fmt.Errorf("max tokens must not be negative, got %d", cfg.MaxTokens))
	}
	if len(cfg.Prompts) == 0 {
		cfg.Prompts = []string{DefaultPrompt}
	}
	if cfg.Tokenizer != "" {
		if cfg.counter, err = tokencount.New(cfg.Tokenizer); err != nil {
			errs = append(errs, fmt.Errorf("tokenizer: %w", err))
		}
	}
	return cfg, errors.Join(errs...)
}

// endpointURL resolves a full endpoint or an SDK-style base URL to the
// API's endpoint.
func endpointURL(raw string, api API) (string, error) {
	if raw == "" {
		return "", errors.New("a URL is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("url must be an http or https URL with a host, got %q", raw)
	}
	path := strings.TrimSuffix(u.Path, "/")
	switch api {
	case Anthropic:
		switch {
		case strings.HasSuffix(path, "/messages"):
		case strings.HasSuffix(path, "/v1"):
			path += "/messages"
		default:
			path += "/v1/messages"
		}
	default:
		if !strings.HasSuffix(path, "/chat/completions") {
			path += "/chat/completions"
		}
	}
	u.Path, u.RawPath = path, ""
	return u.String(), nil
}

// body is request seq's body.
func (cfg *Config) body(seq int) []byte {
	return requestBody(cfg.API, cfg.model(seq), cfg.prompt(seq), cfg.maxTokens(seq))
}

// maxTokens is the output cap of request seq.
func (cfg *Config) maxTokens(seq int) int {
	if seq < len(cfg.Schedule) && cfg.Schedule[seq].MaxTokens > 0 {
		return cfg.Schedule[seq].MaxTokens
	}
	return cfg.MaxTokens
}

// model is the model of request seq.
func (cfg *Config) model(seq int) string { return cfg.Models[seq%len(cfg.Models)] }

// prompt is the prompt of request seq: every model gets the prompts in the
// same order, so no model is paired with only the short ones.
func (cfg *Config) prompt(seq int) string {
	if cfg.Prompt != nil {
		return cfg.Prompt(seq)
	}
	if seq < len(cfg.Schedule) && cfg.Schedule[seq].Prompt != "" {
		return cfg.Schedule[seq].Prompt
	}
	return cfg.Prompts[(seq/len(cfg.Models))%len(cfg.Prompts)]
}
