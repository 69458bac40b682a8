package meter

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func tgiFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "tgi", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tgiReplay feeds a /generate_stream response event by event, the i-th at
// at(i), and finishes it one step after the last.
func tgiReplay(t testing.TB, fixture string) *Measurement {
	t.Helper()
	mt := New(tgi{}, Options{}, t0)
	mt.Request("/generate_stream", []byte(`{"inputs":"What is Deep Learning?","parameters":{"max_new_tokens":20,"details":true}}`), false)
	mt.Response(200, "text/event-stream", "")
	evs := events(tgiFixture(t, fixture))
	for i, ev := range evs {
		mt.Write(ev, t0.Add(at(i)))
	}
	return mt.Finish(t0.Add(at(len(evs))), OutcomeUnknown, "")
}

func TestTGIStreams(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		// firstToken, firstVisible, lastToken are event indexes, -1 for none;
		// firstChunk is the first event that is not a comment.
		firstToken, firstVisible, lastToken, firstChunk int
		usage                                           Usage
		finish                                          []string
		outcome                                         Outcome
		errorType                                       string
		chunks                                          int64
	}{
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
			m := tgiReplay(t, tt.fixture)
			checkEventTime(t, "FirstToken", m.FirstToken, tt.firstToken)
			checkEventTime(t, "FirstVisibleToken", m.FirstVisibleToken, tt.firstVisible)
			checkEventTime(t, "LastToken", m.LastToken, tt.lastToken)
			checkEventTime(t, "FirstChunk", m.FirstChunk, tt.firstChunk)
			if m.Usage != tt.usage {
				t.Errorf("Usage = %+v, want %+v", m.Usage, tt.usage)
			}
			// TGI serves one model and never names it in a response.
			if m.ResponseModel != "" || m.ResponseID != "" || m.Request.Model != "" {
				t.Errorf("model, id, request model = %q, %q, %q; want none", m.ResponseModel, m.ResponseID, m.Request.Model)
			}
			if !reflect.DeepEqual(m.FinishReasons, tt.finish) {
				t.Errorf("FinishReasons = %q, want %q", m.FinishReasons, tt.finish)
			}
			if m.Outcome != tt.outcome || m.ErrorType != tt.errorType {
				t.Errorf("outcome = %v %q, want %v %q", m.Outcome, m.ErrorType, tt.outcome, tt.errorType)
			}
			if m.Chunks != tt.chunks || !m.Streamed || m.Degraded != 0 || m.ServerTimings != nil {
				t.Errorf("Chunks %d Streamed %v Degraded %d ServerTimings %v, want %d true 0 none", m.Chunks, m.Streamed, m.Degraded, m.ServerTimings, tt.chunks)
			}
			want := Request{Stream: true, HasStream: true, MaxTokens: 20, HasMaxTokens: true}
			if m.Operation != "text_completion" || m.Request != want {
				t.Errorf("Operation %q Request %+v, want text_completion %+v", m.Operation, m.Request, want)
			}
		})
	}
}

func TestTGIBodies(t *testing.T) {
	tests := []struct {
		name      string
		fixture   string
		status    int
		usage     Usage
		finish    []string
		outcome   Outcome
		errorType string
	}{
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
			body := tgiFixture(t, tt.fixture)
			mt := New(tgi{}, Options{}, t0)
			mt.Request("/generate", []byte(`{"inputs":"What is Deep Learning?","parameters":{"max_new_tokens":20,"temperature":0.5,"top_p":0.95,"details":true,"decoder_input_details":true}}`), false)
			mt.Response(tt.status, "application/json", "")
			for i := 0; i < len(body); i += 100 {
				mt.Write(body[i:min(i+100, len(body))], t0.Add(step))
			}
			m := mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
			if m.Usage != tt.usage {
				t.Errorf("Usage = %+v, want %+v", m.Usage, tt.usage)
			}
			if !reflect.DeepEqual(m.FinishReasons, tt.finish) {
				t.Errorf("FinishReasons = %q, want %q", m.FinishReasons, tt.finish)
			}
			if m.Outcome != tt.outcome || m.ErrorType != tt.errorType {
				t.Errorf("outcome = %v %q, want %v %q", m.Outcome, m.ErrorType, tt.outcome, tt.errorType)
			}
			if m.FirstToken != 0 || m.Streamed {
				t.Errorf("a non-streamed body has no token times: FirstToken %v Streamed %v", m.FirstToken, m.Streamed)
			}
			want := Request{HasStream: true, MaxTokens: 20, HasMaxTokens: true, Temperature: 0.5, HasTemperature: true, TopP: 0.95, HasTopP: true}
			if m.Request != want || m.Operation != "text_completion" {
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
			if r != tt.want {
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
