package meter

import "github.com/tidwall/gjson"

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
