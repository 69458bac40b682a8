package sink

import (
	"testing"

	"github.com/tokentap/tokentap/internal/meter"
)

func TestTokens(t *testing.T) {
	full := meter.Usage{InputTokens: 10, OutputTokens: 20, CacheReadInputTokens: 3, CacheCreationInputTokens: 4, ReasoningOutputTokens: 5}
	partial := meter.Usage{InputTokens: 10, OutputTokens: 0, CacheReadInputTokens: -1, CacheCreationInputTokens: -1, ReasoningOutputTokens: -1}
	tests := []struct {
		name         string
		usage        meter.Usage
		source       meter.UsageSource
		want         [NumTokenKinds]int64 // -1: not known
		wantReported bool
	}{
		{"no usage: nothing is known, whatever the fields hold", full, meter.UsageAbsent, [NumTokenKinds]int64{-1, -1, -1, -1, -1}, false},
		{"reported: every count", full, meter.UsageReported, [NumTokenKinds]int64{10, 20, 3, 4, 5}, true},
		{"injected counts as reported", full, meter.UsageInjected, [NumTokenKinds]int64{10, 20, 3, 4, 5}, true},
		{"estimated: known, not reported", full, meter.UsageEstimated, [NumTokenKinds]int64{10, 20, 3, 4, 5}, false},
		{"negative counts were not reported; zero is a count", partial, meter.UsageReported, [NumTokenKinds]int64{10, 0, -1, -1, -1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &meter.Measurement{Usage: tt.usage}
			m.Usage.Source = tt.source
			r := &Result{M: m}
			for k := TokenKind(0); k < NumTokenKinds; k++ {
				n, ok := r.Tokens(k)
				if want := tt.want[k]; ok != (want >= 0) || (ok && n != want) {
					t.Errorf("Tokens(%d) = %d, %v; want %d", k, n, ok, want)
				}
			}
			if _, ok := r.Tokens(NumTokenKinds); ok {
				t.Error("a kind past the last is known")
			}
			if got := r.OutputTokensReported(); got != tt.wantReported {
				t.Errorf("OutputTokensReported() = %v, want %v", got, tt.wantReported)
			}
		})
	}
}

func TestModel(t *testing.T) {
	tests := []struct {
		name              string
		request, response string
		want              string
	}{
		{"the response's model wins", "gpt-4o", "gpt-4o-2024-08-06", "gpt-4o-2024-08-06"},
		{"else the request's", "gpt-4o", "", "gpt-4o"},
		{"else none", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Result{M: &meter.Measurement{Request: meter.Request{Model: tt.request}, ResponseModel: tt.response}}
			if got := r.Model(); got != tt.want {
				t.Errorf("Model() = %q, want %q", got, tt.want)
			}
		})
	}
}
