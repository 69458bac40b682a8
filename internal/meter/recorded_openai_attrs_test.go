package meter

import "testing"

// TestRecordedOpenAIServiceTier reads OpenAI's service_tier and
// system_fingerprint from real recorded streams (testdata/recorded/README.md
// names their sources): the values were copied by hand from the payloads.
// The Responses API says the tier asked for ("auto") in response.created
// and the tier that served ("default") in response.completed; the last
// one is kept.
func TestRecordedOpenAIServiceTier(t *testing.T) {
	chat := recordedDialect{func() Dialect { return openAIChat{} }, "/v1/chat/completions", `{"model":"m","stream":true,"service_tier":"auto"}`, eventPieces}
	responses := recordedDialect{func() Dialect { return openAIResponses{} }, "/v1/responses", `{"model":"m","stream":true}`, eventPieces}
	tests := []struct {
		name, fixture            string
		d                        recordedDialect
		tier, fingerprint, asked string
	}{
		{"OpenAI chat: tier and fingerprint in every chunk", "openai/chat_text.sse", chat, "default", "fp_de604bd877", "auto"},
		{"OpenAI chat: fingerprint only", "openai/chat_tool_call.sse", chat, "", "fp_143bb8492c", "auto"},
		{"xAI chat: fingerprint only", "xai/chat_reasoning.sse", chat, "", "fp_2a885414fb", "auto"},
		{"OpenAI Responses: auto asked, default served", "openai/responses_mcp_call.sse", responses, "default", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{200, "text/event-stream", tt.d.path}.start(tt.d.newDialect(), Options{}, []byte(tt.d.request))
			m := replayPieces(mt, tt.d.pieces(tt.fixture, testdata(t, "recorded", tt.fixture)))
			if m.ServiceTier != tt.tier || m.SystemFingerprint != tt.fingerprint || m.Request.ServiceTier != tt.asked {
				t.Errorf("service tier %q, fingerprint %q, asked %q; want %q, %q, %q",
					m.ServiceTier, m.SystemFingerprint, m.Request.ServiceTier, tt.tier, tt.fingerprint, tt.asked)
			}
		})
	}
}
