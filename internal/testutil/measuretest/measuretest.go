// Package measuretest holds measurements that the sinks' tests share, so
// that the export package's tests and the Caddy adapter's tests record the
// same exchange and cannot drift apart.
package measuretest

import (
	"time"

	"github.com/tokentap/tokentap/internal/meter"
)

// Streamed is a completed, streamed chat exchange with reported usage (50
// in, 101 out) and no billed counts (-1, as a Meter leaves them), 11
// chunks and every timing set: the one each sink's test records when it
// needs a full measurement.
func Streamed() *meter.Measurement {
	m := &meter.Measurement{
		Dialect:       "openai_chat",
		Operation:     "chat",
		Request:       meter.Request{Model: "gpt-4o-mini", Stream: true, HasStream: true},
		StatusCode:    200,
		Streamed:      true,
		FirstByte:     90 * time.Millisecond,
		FirstChunk:    100 * time.Millisecond,
		FirstToken:    120 * time.Millisecond,
		LastToken:     1120 * time.Millisecond,
		End:           1200 * time.Millisecond,
		Chunks:        11,
		MaxChunkGap:   150 * time.Millisecond,
		Usage:         Usage(50, 101, meter.UsageReported),
		Billed:        meter.BilledUsage{InputTokens: -1, OutputTokens: -1},
		ResponseModel: "gpt-4o-mini-2024-07-18",
		Outcome:       meter.OutcomeCompleted,
	}
	// Ten gaps between the eleven chunks: eight of 80-160 ms (bucket 4),
	// one of 10 ms and one of 5 ms; the largest is MaxChunkGap.
	m.ChunkGaps.Count[4], m.ChunkGaps.Sum[4] = 8, 8*120*time.Millisecond
	m.ChunkGaps.Count[0], m.ChunkGaps.Sum[0] = 2, 15*time.Millisecond
	return m
}

// Usage is usage without cache or reasoning counts (-1: not reported).
func Usage(input, output int64, source meter.UsageSource) meter.Usage {
	return meter.Usage{InputTokens: input, OutputTokens: output, CacheReadInputTokens: -1, CacheCreationInputTokens: -1, ReasoningOutputTokens: -1, Source: source}
}
