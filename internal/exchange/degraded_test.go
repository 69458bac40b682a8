package exchange

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tokentap/tokentap/internal/meter"
)

// TestDegradedLoggedOnce: a degraded measurement is logged at warn level
// once per dialect and reason however often it recurs, with the dialect,
// reason and model; a clean one is not logged. The counter and the span
// say how often and which exchanges (otelexport).
func TestDegradedLoggedOnce(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	mw := New(Config{Logger: zap.New(core)})
	x := &exchange{mw: mw}
	measurements := []meter.Measurement{
		{Dialect: "bedrock_invoke", Degraded: 2, DegradedReason: "invoke_chunk_unknown", Request: meter.Request{Model: "example.new-model-v1:0"}},
		{Dialect: "bedrock_invoke", Degraded: 1, DegradedReason: "invoke_chunk_unknown", Request: meter.Request{Model: "example.other-v1:0"}},
		{Dialect: "bedrock_invoke", Degraded: 1, DegradedReason: "invoke_body_unknown"},
		{Dialect: "openai_chat", Degraded: 1, DegradedReason: "invoke_body_unknown"},
		{Dialect: "openai_chat"},
	}
	for range 3 {
		for i := range measurements {
			if measurements[i].Degraded > 0 {
				x.logDegraded(&measurements[i])
			}
		}
	}
	for _, tc := range []struct {
		dialect, reason string
		want            int
	}{
		{"bedrock_invoke", "invoke_chunk_unknown", 1},
		{"bedrock_invoke", "invoke_body_unknown", 1},
		{"openai_chat", "invoke_body_unknown", 1},
		{"openai_chat", "", 0},
	} {
		got := logs.FilterField(zap.String("dialect", tc.dialect)).FilterField(zap.String("reason", tc.reason)).Len()
		if got != tc.want {
			t.Errorf("%s %q: %d log lines, want %d", tc.dialect, tc.reason, got, tc.want)
		}
	}
	if n := logs.FilterField(zap.String("model", "example.new-model-v1:0")).Len(); n != 1 {
		t.Errorf("%d log lines name the first degraded exchange's model, want 1", n)
	}
	if logs.Len() != 3 {
		t.Errorf("%d log lines, want 3", logs.Len())
	}
}

// TestOnceLogBound: onceLog remembers at most maxLoggedOnce warnings, so
// that made-up names cannot grow it without end; past the bound nothing
// more is logged.
func TestOnceLogBound(t *testing.T) {
	var l onceLog
	for i := range maxLoggedOnce {
		if !l.first("unpriced", string(rune('a'+i%26))+string(rune(i))) {
			t.Fatalf("warning %d not first", i)
		}
	}
	if l.first("unpriced", "one more") || l.first("degraded", "x") {
		t.Error("a warning past the bound was logged")
	}
	if len(l.seen) != maxLoggedOnce {
		t.Errorf("%d remembered, want %d", len(l.seen), maxLoggedOnce)
	}
}
