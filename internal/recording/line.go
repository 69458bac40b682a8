package recording

import (
	"encoding/json"
	"time"

	"github.com/tokentap/tokentap/internal/sink"
)

// Line is one finished exchange in a recording. Counts are -1 when
// unknown; times are seconds. The arrival offset a replay uses is Start
// less the earliest Start of the lines replayed, so files rotated apart
// or recorded by several instances replay together.
type Line struct {
	// Start is when the request reached the proxy.
	Start time.Time `json:"start"`
	// Route is the path the client requested, without the query.
	Route string `json:"route"`
	// API is the dialect that read the exchange (openai_chat, anthropic,
	// gemini, ...), Provider the gen_ai.provider.name.
	API      string `json:"api"`
	Provider string `json:"provider,omitempty"`
	// Model is the model requested, ResponseModel the one that answered.
	Model         string `json:"model"`
	ResponseModel string `json:"response_model,omitempty"`
	// Stream is whether the client asked for a stream.
	Stream bool `json:"stream"`
	// InputTokens is the input count the usage reported.
	InputTokens int64 `json:"input_tokens"`
	// MaxTokens is the output cap the request asked for, 0 when none.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// OutputTokens and OutputTokensSource: the output count and where it
	// came from (reported, injected, estimated or absent, as
	// tokentap.usage.source).
	OutputTokens       int64  `json:"output_tokens"`
	OutputTokensSource string `json:"output_tokens_source"`
	// Outcome is tokentap.outcome (completed, truncated, upstream_error,
	// client_abort) and Status the upstream's HTTP status.
	Outcome string `json:"outcome"`
	Status  int    `json:"status,omitempty"`
	// TimeToFirstToken and OutputTokensPerSecond are tokentap's
	// measurements, 0 when undefined; Duration is the whole exchange.
	TimeToFirstToken      float64 `json:"time_to_first_token_seconds,omitempty"`
	OutputTokensPerSecond float64 `json:"output_tokens_per_second,omitempty"`
	Duration              float64 `json:"duration_seconds"`
	// Input is the captured prompt, the GenAI conventions' input messages
	// JSON, only when content capture was on for the exchange (and its
	// span recorded); a replay then sends the same text.
	Input json.RawMessage `json:"input,omitempty"`
	// HashIDs are a mooncake trace's block hashes, kept by ReadMooncake
	// so that a replay shares prompt prefixes as the trace's requests did;
	// tokentap's own lines have none.
	HashIDs []int `json:"hash_ids,omitempty"`
}

// FromResult is r as a recording's line.
func FromResult(r *sink.Result) Line {
	m := r.M
	l := Line{
		Start:              m.Start,
		Route:              r.Route,
		API:                m.Dialect,
		Provider:           r.Provider,
		Model:              m.Request.Model,
		ResponseModel:      m.ResponseModel,
		Stream:             m.Request.Stream,
		InputTokens:        m.Usage.InputTokens,
		OutputTokens:       m.Usage.OutputTokens,
		OutputTokensSource: m.Usage.Source.String(),
		Outcome:            m.Outcome.String(),
		Status:             m.StatusCode,
		Duration:           m.End.Seconds(),
	}
	if m.Request.HasMaxTokens {
		l.MaxTokens = m.Request.MaxTokens
	}
	if m.FirstToken > 0 {
		l.TimeToFirstToken = m.FirstToken.Seconds()
	}
	if tps, ok := m.OutputTokensPerSecond(); ok {
		l.OutputTokensPerSecond = tps
	}
	if in := r.Content.Input.JSON; in != "" && json.Valid([]byte(in)) {
		l.Input = json.RawMessage(in)
	}
	return l
}

// Offset is l's arrival offset from origin, the earliest start replayed.
func (l *Line) Offset(origin time.Time) time.Duration { return l.Start.Sub(origin) }

// Completed reports whether the exchange ended with its dialect's
// terminator: only those have measurements to compare.
func (l *Line) Completed() bool { return l.Outcome == "completed" }
