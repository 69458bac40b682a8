package meter

import (
	"strings"

	"github.com/tidwall/gjson"
)

// requestNames are one API's names for the request parameters whose names
// differ between the OpenAI-like APIs; model, stream and temperature are
// named alike in all of them.
type requestNames struct {
	// maxTokens lists the names of the output limit, the preferred first:
	// a client sends one of them.
	maxTokens []string
	topP      string
}

var (
	// max_completion_tokens replaced max_tokens for reasoning models.
	openAIChatRequest      = requestNames{maxTokens: []string{"max_completion_tokens", "max_tokens"}, topP: "top_p"}
	openAIResponsesRequest = requestNames{maxTokens: []string{"max_output_tokens"}, topP: "top_p"}
	anthropicRequest       = requestNames{maxTokens: []string{"max_tokens"}, topP: "top_p"}
	// Cohere's nucleus-sampling parameter is p.
	cohereRequest = requestNames{maxTokens: []string{"max_tokens"}, topP: "p"}
)

// readRequest reads the parameters that every dialect reports from a
// request body whose top-level names are names'. A parameter of the wrong
// JSON type is left unknown rather than guessed.
func readRequest(r *Request, body []byte, names requestNames) {
	if v := gjson.GetBytes(body, "model"); v.Type == gjson.String {
		r.Model = v.Str
	}
	if v := gjson.GetBytes(body, "stream"); v.IsBool() {
		r.Stream, r.HasStream = v.Bool(), true
	}
	for _, name := range names.maxTokens {
		if v := gjson.GetBytes(body, name); v.Type == gjson.Number {
			r.MaxTokens, r.HasMaxTokens = v.Int(), true
			break
		}
	}
	if v := gjson.GetBytes(body, "temperature"); v.Type == gjson.Number {
		r.Temperature, r.HasTemperature = v.Float(), true
	}
	if v := gjson.GetBytes(body, names.topP); v.Type == gjson.Number {
		r.TopP, r.HasTopP = v.Float(), true
	}
}

// maxStopSequences caps the stop sequences kept from one request: APIs
// allow a handful (OpenAI 4, Gemini 5), and an attribute is no place for a
// client's thousand.
const maxStopSequences = 16

// samplingNames are one API's paths, relative to the object that holds its
// parameters, for the sampling parameters beyond requestNames'. Each is a
// |-separated list of gjson paths, the first present one read; an empty
// one is a parameter the API does not have.
type samplingNames struct {
	seed, topK, stop, choiceCount, frequencyPenalty, presencePenalty string
}

var (
	// top_k is not OpenAI's but the OpenAI-compatible servers' (vLLM,
	// Together, Fireworks, llama.cpp).
	openAIChatSampling = samplingNames{seed: "seed", topK: "top_k", stop: "stop", choiceCount: "n",
		frequencyPenalty: "frequency_penalty", presencePenalty: "presence_penalty"}
	anthropicSampling = samplingNames{topK: "top_k", stop: "stop_sequences"}
	// Cohere's top-k parameter is k.
	cohereSampling = samplingNames{seed: "seed", topK: "k", stop: "stop_sequences",
		frequencyPenalty: "frequency_penalty", presencePenalty: "presence_penalty"}
	// Gemini's generationConfig, in its JSON names and its proto names.
	geminiSampling = samplingNames{seed: "seed", topK: "topK|top_k", stop: "stopSequences|stop_sequences",
		choiceCount: "candidateCount|candidate_count", frequencyPenalty: "frequencyPenalty|frequency_penalty",
		presencePenalty: "presencePenalty|presence_penalty"}
	// Ollama's options.
	ollamaSampling = samplingNames{seed: "seed", topK: "top_k", stop: "stop",
		frequencyPenalty: "frequency_penalty", presencePenalty: "presence_penalty"}
	// Bedrock's Converse has stop sequences in inferenceConfig and the
	// model's own parameters in additionalModelRequestFields; InvokeModel
	// bodies are the model's native ones (Anthropic's, Amazon's, Meta's).
	bedrockConverseSampling = samplingNames{topK: "additionalModelRequestFields.top_k", stop: "inferenceConfig.stopSequences"}
	bedrockInvokeSampling   = samplingNames{seed: "seed", topK: "top_k|inferenceConfig.topK",
		stop: "stop_sequences|textGenerationConfig.stopSequences|inferenceConfig.stopSequences"}
)

// readSampling reads the parameters of names from obj, the object that
// holds them. As in readRequest, a parameter of the wrong JSON type is left
// unknown. The choice count is kept only when it is not 1, as the
// conventions ask.
func readSampling(r *Request, obj gjson.Result, names samplingNames) {
	if v := firstOf(obj, names.seed); v.Type == gjson.Number {
		r.Seed, r.HasSeed = v.Int(), true
	}
	if v := firstOf(obj, names.topK); v.Type == gjson.Number {
		r.TopK, r.HasTopK = v.Float(), true
	}
	if v := firstOf(obj, names.frequencyPenalty); v.Type == gjson.Number {
		r.FrequencyPenalty, r.HasFrequencyPenalty = v.Float(), true
	}
	if v := firstOf(obj, names.presencePenalty); v.Type == gjson.Number {
		r.PresencePenalty, r.HasPresencePenalty = v.Float(), true
	}
	if v := firstOf(obj, names.choiceCount); v.Type == gjson.Number && v.Int() != 1 {
		r.ChoiceCount, r.HasChoiceCount = v.Int(), true
	}
	switch v := firstOf(obj, names.stop); {
	case v.Type == gjson.String:
		r.StopSequences = []string{v.Str}
	case v.IsArray():
		v.ForEach(func(_, s gjson.Result) bool {
			if s.Type == gjson.String {
				r.StopSequences = append(r.StopSequences, s.Str)
			}
			return len(r.StopSequences) < maxStopSequences
		})
	}
}

// firstOf returns the first of the |-separated paths present in obj.
func firstOf(obj gjson.Result, paths string) gjson.Result {
	if paths == "" {
		return gjson.Result{}
	}
	for p := range strings.SplitSeq(paths, "|") {
		if v := obj.Get(p); v.Exists() {
			return v
		}
	}
	return gjson.Result{}
}

// readServiceTier reads OpenAI's service_tier request parameter ("auto",
// "default", "flex", "priority").
func readServiceTier(r *Request, body []byte) {
	if v := gjson.GetBytes(body, "service_tier"); v.Type == gjson.String {
		r.ServiceTier = v.Str
	}
}
