package usagecheck

import "strings"

// A model's tokenizer, by the model's name, as its provider states it.
// Only OpenAI publishes its models' encodings, and only those tokentap
// can count (tokencount.Encodings) are here: every other model is
// unverifiable, which is counted, never taken for a mismatch.
//
// source: https://github.com/openai/tiktoken/blob/main/tiktoken/model.py
// (MODEL_TO_ENCODING, MODEL_PREFIX_TO_ENCODING).
var families = []struct {
	// name matches the model itself and, followed by "-", its snapshots
	// and variants (gpt-4o-2024-08-06, gpt-4o-mini); with point also
	// followed by "." (gpt-5.1, gpt-5.2-codex).
	name, encoding string
	point          bool
}{
	{"gpt-5", "o200k_base", true},
	{"gpt-4.1", "o200k_base", false},
	{"gpt-4.5", "o200k_base", false},
	{"gpt-4o", "o200k_base", false},
	{"chatgpt-4o", "o200k_base", false},
	{"o1", "o200k_base", false},
	{"o3", "o200k_base", false},
	{"o4-mini", "o200k_base", false},
	{"gpt-4", "cl100k_base", false},
	{"gpt-3.5-turbo", "cl100k_base", false},
	{"gpt-35-turbo", "cl100k_base", false},
}

// EncodingFor returns the encoding of model's tokenizer, and false when
// it is not known. A provider's prefix ("openai/gpt-4o" on OpenRouter)
// and an Azure-style deployment that keeps the model's name are read as
// the model. A family matches only the whole name or the name followed by
// a separator, so "gpt-4o" and "gpt-4.1" are never taken for "gpt-4".
func EncodingFor(model string) (string, bool) {
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		model = model[i+1:]
	}
	model = strings.ToLower(model)
	for _, f := range families {
		rest, ok := strings.CutPrefix(model, f.name)
		if ok && (rest == "" || rest[0] == '-' || f.point && rest[0] == '.') {
			return f.encoding, true
		}
	}
	return "", false
}

// Encodings are the encodings EncodingFor may return, each once: what a
// handler that verifies must have loaded.
func Encodings() []string {
	var out []string
	for _, f := range families {
		if !contains(out, f.encoding) {
			out = append(out, f.encoding)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
