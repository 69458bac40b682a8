package meter

import (
	"reflect"
	"testing"
)

func TestTGIStreams(t *testing.T) {
	// TGI serves one model and never names it in a response: no row has a
	// model or id.
	tests := []dialectCase{
		{
			name: "data: without a space; the final special token counts but is not visible; input_length is input", fixture: "generate_stream.sse",
			firstToken: 0, firstVisible: 0, lastToken: 9,
			usage:  Usage{7, 10, -1, -1, -1, UsageReported},
			finish: []string{"eos_token"}, outcome: OutcomeCompleted, chunks: 10,
		},
		{
			name: "older server: keep-alive comment is no chunk, details without input_length", fixture: "length.sse",
			firstToken: 1, firstVisible: 1, lastToken: 5, firstChunk: 1,
			usage:  Usage{-1, 5, -1, -1, -1, UsageReported},
			finish: []string{"length"}, outcome: OutcomeCompleted, chunks: 5,
		},
		{
			name: "byte-fallback token with empty text is a token but not yet visible", fixture: "byte_fallback.sse",
			firstToken: 0, firstVisible: 1, lastToken: 3,
			usage:  Usage{12, 4, -1, -1, -1, UsageReported},
			finish: []string{"eos_token"}, outcome: OutcomeCompleted, chunks: 4,
		},
		{
			name: "details not requested: generated_text still ends it, one token per event is the exact count", fixture: "no_details_special_first.sse",
			firstToken: 0, firstVisible: 1, lastToken: 3,
			usage:   Usage{-1, 4, -1, -1, -1, UsageEstimated},
			outcome: OutcomeCompleted, chunks: 4,
		},
		{
			name: "error event after 200 is an upstream error typed by error_type", fixture: "error.sse",
			firstToken: 0, firstVisible: 0, lastToken: 1,
			usage:   Usage{-1, 2, -1, -1, -1, UsageEstimated},
			outcome: OutcomeUpstreamError, errorType: "generation", chunks: 3,
		},
		{
			name: "stream cut before generated_text is truncated", fixture: "truncated.sse",
			firstToken: 0, firstVisible: 0, lastToken: 2,
			usage:   Usage{-1, 3, -1, -1, -1, UsageEstimated},
			outcome: OutcomeTruncated, errorType: "truncated", chunks: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{200, "text/event-stream", "/generate_stream"}.start(tgi{}, Options{}, []byte(`{"inputs":"What is Deep Learning?","parameters":{"max_new_tokens":20,"details":true}}`))
			m := replayPieces(mt, events(testdata(t, "tgi", tt.fixture)))
			checkStream(t, m, tt)
			// No model: TGI's request does not name one either.
			want := Request{Stream: true, HasStream: true, MaxTokens: 20, HasMaxTokens: true}
			if m.Operation != "text_completion" || !reflect.DeepEqual(m.Request, want) {
				t.Errorf("Operation %q Request %+v, want text_completion %+v", m.Operation, m.Request, want)
			}
		})
	}
}

func TestTGIBodies(t *testing.T) {
	tests := []dialectCase{
		{
			name: "/generate with details: generated_tokens, prefill length is input", fixture: "generate.json", status: 200,
			usage:  Usage{6, 10, -1, -1, -1, UsageReported},
			finish: []string{"eos_token"}, outcome: OutcomeCompleted,
		},
		{
			name: "array body without details: output estimated from generated_text", fixture: "generate_array.json", status: 200,
			usage:   Usage{-1, 11, -1, -1, -1, UsageEstimated},
			outcome: OutcomeCompleted,
		},
		{
			name: "422 validation error: status is the error type, no fake counts", fixture: "error_422.json", status: 422,
			usage:   Usage{-1, -1, -1, -1, -1, UsageAbsent},
			outcome: OutcomeUpstreamError, errorType: "422",
		},
		{
			name: "error body with 200 is typed by error_type", fixture: "error_422.json", status: 200,
			usage:   Usage{-1, -1, -1, -1, -1, UsageAbsent},
			outcome: OutcomeUpstreamError, errorType: "validation",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{tt.status, "application/json", "/generate"}.start(tgi{}, Options{}, []byte(`{"inputs":"What is Deep Learning?","parameters":{"max_new_tokens":20,"temperature":0.5,"top_p":0.95,"details":true,"decoder_input_details":true}}`))
			m := readInPieces(mt, testdata(t, "tgi", tt.fixture), 100)
			checkBody(t, m, tt)
			want := Request{HasStream: true, MaxTokens: 20, HasMaxTokens: true, Temperature: 0.5, HasTemperature: true, TopP: 0.95, HasTopP: true}
			if !reflect.DeepEqual(m.Request, want) || m.Operation != "text_completion" {
				t.Errorf("Operation %q request = %+v, want %+v", m.Operation, m.Request, want)
			}
		})
	}
}

func TestTGIRequest(t *testing.T) {
	tests := []struct {
		name, path, body string
		want             Request
	}{
		{"root route streams when the body says so", "/", `{"inputs":"x","stream":true,"parameters":{"max_new_tokens":5}}`,
			Request{Stream: true, HasStream: true, MaxTokens: 5, HasMaxTokens: true}},
		{"/generate_stream streams whatever the body says", "/generate_stream", `{"inputs":"x","stream":false}`,
			Request{Stream: true, HasStream: true}},
		{"parameters of the wrong type are ignored", "/generate", `{"inputs":"x","parameters":{"max_new_tokens":"5","top_p":null}}`,
			Request{HasStream: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			tgi{}.Request(&r, tt.path, []byte(tt.body))
			if !reflect.DeepEqual(r, tt.want) {
				t.Errorf("got %+v, want %+v", r, tt.want)
			}
		})
	}
}

// TestTGISplitInvariance: every split point of every fixture, then random
// multi-way splits, give the same measurement.
func TestTGISplitInvariance(t *testing.T) {
	checkSplitInvariance(t, func() Dialect { return tgi{} }, "tgi/*", byExtension)
}

// TestTGIEventAllocations: once warm, reading any event of any fixture
// allocates nothing.
func TestTGIEventAllocations(t *testing.T) {
	checkFixtureAllocations(t, func() Dialect { return tgi{} }, "tgi/*.sse", "text/event-stream", events)
}
