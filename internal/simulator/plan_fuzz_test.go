package simulator

import (
	"errors"
	"testing"
)

// FuzzPlanTarget feeds arbitrary bodies to every format's request parser:
// a malformed request must be answered with an API error, never a panic,
// and a plan must have as many offsets as tokens.
func FuzzPlanTarget(f *testing.F) {
	for _, wf := range wireFormats {
		f.Add(wf.target, []byte(wf.stream))
		f.Add(wf.bodyTarget, []byte(wf.plain))
		f.Add(wf.target, []byte(wf.capped))
	}
	f.Add("/v1/messages", []byte(`{"max_tokens":1e999,"messages":[{"content":[{"text":1}]}]}`))
	f.Add("/api/generate", []byte(`{"options":{"num_predict":-1e999},"stream":"yes"}`))
	h := &Handler{Profile: Profile{OutputTokens: 8}}
	f.Fuzz(func(t *testing.T, target string, body []byte) {
		p, err := h.PlanTarget(target, body, nil)
		if err != nil {
			if _, ok := errors.AsType[*apiError](err); !ok {
				t.Fatalf("error %T %v is not an API error", err, err)
			}
			return
		}
		if len(p.Tokens) == 0 || len(p.Tokens) != len(p.Offsets) || len(p.Tokens) > 8 || p.PromptTokens < 1 {
			t.Fatalf("plan of %d tokens, %d offsets, %d prompt tokens", len(p.Tokens), len(p.Offsets), p.PromptTokens)
		}
	})
}
