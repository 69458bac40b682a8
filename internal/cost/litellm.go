package cost

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// litellmEntry is the part of a LiteLLM model entry that prices tokens, in
// dollars per token.
type litellmEntry struct {
	Input      *float64 `json:"input_cost_per_token"`
	Output     *float64 `json:"output_cost_per_token"`
	CacheRead  *float64 `json:"cache_read_input_token_cost"`
	CacheWrite *float64 `json:"cache_creation_input_token_cost"`
	Reasoning  *float64 `json:"output_cost_per_reasoning_token"`
}

// LoadLiteLLM adds the prices of a file in LiteLLM's
// model_prices_and_context_window.json format: an object of model names,
// each with input_cost_per_token and output_cost_per_token (dollars per
// token) and, where the model has them, cache_read_input_token_cost,
// cache_creation_input_token_cost and output_cost_per_reasoning_token.
// Entries without both token prices (image and audio models) are skipped
// and counted; an entry with a price that is not a number, or a negative
// one, is an error, since a list that says so is not one to bill by.
func (t *Table) LoadLiteLLM(data []byte) (loaded, skipped int, err error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return 0, 0, fmt.Errorf("pricing file: %v", err)
	}
	if t.file == nil {
		t.file = map[string]Price{}
	}
	// In name order, so that of two entries whose names differ only in
	// the provider prefix the same one gives the unprefixed name its
	// price on every load.
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		msg := raw[name]
		var e litellmEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			return loaded, skipped, fmt.Errorf("pricing file, model %s: %v", name, err)
		}
		if e.Input == nil || e.Output == nil {
			skipped++
			continue
		}
		p := Price{Input: *e.Input * 1e6, Output: *e.Output * 1e6,
			CacheRead: perMillion(e.CacheRead), CacheWrite: perMillion(e.CacheWrite), Reasoning: perMillion(e.Reasoning)}
		if err := p.Validate(); err != nil {
			return loaded, skipped, fmt.Errorf("pricing file, model %s: %v", name, err)
		}
		t.file[name] = p
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			// The unprefixed name, unless another entry has it already.
			if _, taken := t.file[suffixKey+name[i+1:]]; !taken {
				t.file[suffixKey+name[i+1:]] = p
			}
		}
		loaded++
	}
	return loaded, skipped, nil
}

func perMillion(v *float64) *float64 {
	if v == nil {
		return nil
	}
	m := *v * 1e6
	return &m
}
