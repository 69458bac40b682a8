package meter

import (
	"encoding/base64"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"reflect"
	"testing"

	aws "github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

const (
	bedrockConversePath = "/model/anthropic.claude-3-5-sonnet-20240620-v1:0/converse-stream"
	bedrockInvokePath   = "/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke-with-response-stream"
)

// bedrockMeter is a Meter for path, its dialect found as the handler finds
// it, with the response headers of a Bedrock stream.
func bedrockMeter(t testing.TB, path string, opts Options) *Meter {
	t.Helper()
	info := DetectDialect(path)
	if info.Provider != "aws.bedrock" {
		t.Fatalf("%s detected as %s", path, info.Name)
	}
	return exchange{200, "application/vnd.amazon.eventstream", path}.start(info.New(), opts, []byte(`{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`))
}

func TestBedrockStreams(t *testing.T) {
	// The times are of messages, not events.
	tests := []dialectCase{
		{
			name: "converse: messageStart and an empty delta are not tokens; padding p is never text; input includes cache", path: bedrockConversePath, fixture: "converse_text.bin",
			firstToken: 2, firstVisible: 2, lastToken: 3,
			usage:  Usage{20 + 1024 + 0, 8, 1024, 0, -1, UsageReported},
			finish: []string{"end_turn"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"latency", 0.531}}, chunks: 7,
		},
		{
			name: "converse: reasoning and tool input are output, not visible; signature, contentBlockStart and the empty tool input are nothing", path: bedrockConversePath, fixture: "converse_reasoning_tool.bin",
			firstToken: 1, firstVisible: 4, lastToken: 8,
			usage:  Usage{412, 96, -1, -1, -1, UsageReported},
			finish: []string{"tool_use"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"latency", 2.21}}, chunks: 12,
		},
		{
			name: "converse: throttlingException frame after 200 is the error type", path: bedrockConversePath, fixture: "converse_throttled.bin",
			firstToken: 1, firstVisible: 1, lastToken: 1,
			usage:   Usage{-1, 1, -1, -1, -1, UsageEstimated},
			outcome: OutcomeThrottled, errorType: "throttlingException", chunks: 3,
		},
		{
			name: "converse: unmodelled error frame gives its error code", path: bedrockConversePath, fixture: "converse_internal_failure.bin",
			firstToken: -1, firstVisible: -1, lastToken: -1,
			usage:   Usage{-1, -1, -1, -1, -1, UsageAbsent},
			outcome: OutcomeUpstreamError, errorType: "InternalFailure", chunks: 2,
		},
		{
			name: "converse: cut before messageStop is truncated with an estimate", path: bedrockConversePath, fixture: "converse_truncated.bin",
			firstToken: 2, firstVisible: 2, lastToken: 3,
			usage:   Usage{-1, 7, -1, -1, -1, UsageEstimated},
			outcome: OutcomeTruncated, errorType: "truncated", chunks: 4,
		},
		{
			name: "converse: messageStop without metadata is complete, without usage", path: bedrockConversePath, fixture: "converse_no_metadata.bin",
			firstToken: 2, firstVisible: 2, lastToken: 3,
			usage:  Usage{-1, 7, -1, -1, -1, UsageEstimated},
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, chunks: 6,
		},
		{
			name: "converse: bad checksum stops decoding, degraded and truncated", path: bedrockConversePath, fixture: "converse_corrupt.bin",
			firstToken: -1, firstVisible: -1, lastToken: -1,
			usage:   Usage{-1, -1, -1, -1, -1, UsageAbsent},
			outcome: OutcomeTruncated, errorType: "truncated",
			// Two messages; the framer's Faults says the framing broke.
			chunks: 2, degraded: "eventstream_corrupt",
		},
		{
			name: "invoke: Anthropic inside chunks, usage and latencies from invocation metrics", path: bedrockInvokePath, fixture: "invoke_anthropic.bin",
			firstToken: 2, firstVisible: 2, lastToken: 3,
			usage: Usage{10, 12, 0, 0, -1, UsageReported},
			model: "claude-sonnet-4-5-20250929", id: "msg_bdrk_012GBPzpcoMCLP1b2pcJsSHk",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"invocation_latency", 0.679}, {"first_byte_latency", 0.398}}, chunks: 7,
		},
		{
			name: "invoke: thinking and tool input are not visible; ping, signature and empty partial_json are nothing; whitespace-padded JSON; cache read in input", path: bedrockInvokePath, fixture: "invoke_anthropic_thinking_tools.bin",
			firstToken: 3, firstVisible: -1, lastToken: 8,
			usage: Usage{5 + 2048 + 0, 140, 2048, 0, -1, UsageReported},
			model: "claude-3-7-sonnet-20250219", id: "msg_bdrk_01Xq7rTz",
			finish: []string{"tool_use"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"invocation_latency", 3.12}, {"first_byte_latency", 1.45}}, chunks: 12,
		},
		{
			name: "invoke: Anthropic error event inside a chunk", path: bedrockInvokePath, fixture: "invoke_anthropic_overloaded.bin",
			firstToken: 2, firstVisible: 2, lastToken: 2,
			usage: Usage{31, 1, 0, 0, -1, UsageEstimated},
			model: "claude-3-5-haiku-20241022", id: "msg_bdrk_01Ov",
			outcome: OutcomeThrottled, errorType: "overloaded_error", chunks: 4,
		},
		{
			name: "invoke: modelStreamErrorException frame", path: bedrockInvokePath, fixture: "invoke_stream_error.bin",
			firstToken: -1, firstVisible: -1, lastToken: -1,
			usage: Usage{12, -1, -1, -1, -1, UsageReported},
			model: "claude-3-haiku-20240307", id: "msg_bdrk_01Se",
			outcome: OutcomeUpstreamError, errorType: "modelStreamErrorException", chunks: 2,
		},
		{
			name: `invoke: base64 with an escaped "\/" still decodes`, path: bedrockInvokePath, fixture: "invoke_escaped_slash.bin",
			firstToken: 1, firstVisible: 1, lastToken: 1,
			usage: Usage{7, 3, -1, -1, -1, UsageReported},
			model: "claude-3-haiku-20240307", id: "msg_bdrk_01Sl",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"invocation_latency", 0.201}, {"first_byte_latency", 0.15}}, chunks: 4,
		},
		{
			name: "invoke: Llama generation text; its last chunk's metrics end the stream", path: "/model/meta.llama3-1-8b-instruct-v1:0/invoke-with-response-stream", fixture: "invoke_llama.bin",
			firstToken: 1, firstVisible: 1, lastToken: 2,
			usage:  Usage{18, 6, -1, -1, -1, UsageReported},
			finish: []string{"stop"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"invocation_latency", 0.512}, {"first_byte_latency", 0.22}}, chunks: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := replayPieces(bedrockMeter(t, tt.path, Options{}), bedrockFrames(testdata(t, "bedrock", tt.fixture)))
			checkStream(t, m, tt)
		})
	}
}

func TestBedrockBodies(t *testing.T) {
	tests := []dialectCase{
		{
			name: "converse: usage with cache write, stop reason, latency", path: "/model/anthropic.claude-3-7-sonnet-20250219-v1:0/converse", fixture: "converse.json", status: 200,
			usage:  Usage{15 + 0 + 256, 22, 0, 256, -1, UsageReported},
			finish: []string{"end_turn"}, outcome: OutcomeCompleted, timings: []ServerTiming{{"latency", 1.29}},
		},
		{
			name: "converse: tool call", path: "/model/amazon.nova-pro-v1:0/converse", fixture: "converse_tool.json", status: 200,
			usage:  Usage{380, 41, -1, -1, -1, UsageReported},
			finish: []string{"tool_use"}, outcome: OutcomeCompleted, timings: []ServerTiming{{"latency", 0.845}},
		},
		{
			name: "invoke: Anthropic message", path: "/model/anthropic.claude-3-5-sonnet-20240620-v1:0/invoke", fixture: "invoke_anthropic.json", status: 200,
			usage: Usage{9, 9, 0, 0, -1, UsageReported}, model: "claude-3-5-sonnet-20240620", id: "msg_bdrk_01AbCdEfGhIjKlMn",
			finish: []string{"end_turn"}, outcome: OutcomeCompleted,
		},
		{
			name: "invoke: Llama totals", path: "/model/meta.llama3-8b-instruct-v1:0/invoke", fixture: "invoke_llama.json", status: 200,
			usage: Usage{11, 8, -1, -1, -1, UsageReported}, finish: []string{"stop"}, outcome: OutcomeCompleted,
		},
		{
			name: "converse: 429 error body, no fake counts", path: bedrockConversePath, fixture: "error_429.json", status: 429,
			usage: Usage{-1, -1, -1, -1, -1, UsageAbsent}, outcome: OutcomeThrottled, errorType: "429",
		},
		{
			name: "invoke: 400 validation error body", path: bedrockInvokePath, fixture: "error_400.json", status: 400,
			usage: Usage{-1, -1, -1, -1, -1, UsageAbsent}, outcome: OutcomeUpstreamError, errorType: "400",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{tt.status, "application/json", tt.path}.start(DetectDialect(tt.path).New(), Options{}, nil)
			m := readInPieces(mt, testdata(t, "bedrock", tt.fixture), 64)
			checkBody(t, m, tt)
			if tt.status == 200 && m.EstimatedOutputTokens <= 0 {
				t.Errorf("no output estimated from the body")
			}
		})
	}
}

func TestBedrockPaths(t *testing.T) {
	tests := []struct {
		name      string
		path      string
		dialect   string // "" for not Bedrock
		operation string
		model     string
		stream    bool
	}{
		{"converse-stream with a model id", "/model/anthropic.claude-3-5-sonnet-20240620-v1:0/converse-stream", "bedrock_converse", "chat", "anthropic.claude-3-5-sonnet-20240620-v1:0", true},
		{"converse with a cross-region inference profile", "/model/us.anthropic.claude-3-7-sonnet-20250219-v1:0/converse", "bedrock_converse", "chat", "us.anthropic.claude-3-7-sonnet-20250219-v1:0", false},
		{"invoke stream with an unescaped ARN", "/model/arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-haiku-20241022-v1:0/invoke-with-response-stream", "bedrock_invoke", "chat", "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-haiku-20241022-v1:0", true},
		{"escaped ARN is unescaped", "/model/arn%3Aaws%3Abedrock%3Aus-west-2%3A123456789012%3Aapplication-inference-profile%2Fa1b2c3d4/converse-stream", "bedrock_converse", "chat", "arn:aws:bedrock:us-west-2:123456789012:application-inference-profile/a1b2c3d4", true},
		{"behind a route prefix, trailing slash", "/bedrock/model/meta.llama3-8b-instruct-v1:0/invoke/", "bedrock_invoke", "chat", "meta.llama3-8b-instruct-v1:0", false},
		{"embedding model on invoke", "/model/amazon.titan-embed-text-v2:0/invoke", "bedrock_invoke", "embeddings", "amazon.titan-embed-text-v2:0", false},
		{"no model id", "/model/converse", "", "", "", false},
		{"unknown operation", "/model/x/apply-guardrail", "", "", "", false},
		{"not Bedrock", "/v1/chat/completions", "", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := DetectDialect(tt.path)
			if tt.dialect == "" {
				if info.Provider == "aws.bedrock" {
					t.Fatalf("detected as %s", info.Name)
				}
				return
			}
			if info.Name != tt.dialect || info.Provider != "aws.bedrock" {
				t.Fatalf("detected as %s (%s)", info.Name, info.Provider)
			}
			d := info.New()
			if d.Name() != tt.dialect || d.Operation(tt.path) != tt.operation {
				t.Errorf("Name %q Operation %q", d.Name(), d.Operation(tt.path))
			}
			var r Request
			d.Request(&r, tt.path, nil)
			if r.Model != tt.model || r.Stream != tt.stream || !r.HasStream {
				t.Errorf("request = %+v", r)
			}
		})
	}
}

func TestBedrockRequestParameters(t *testing.T) {
	tests := []struct {
		name string
		path string
		body string
		want Request
	}{
		{"converse inferenceConfig", bedrockConversePath,
			`{"messages":[],"inferenceConfig":{"maxTokens":512,"temperature":0.5,"topP":0.9}}`,
			Request{MaxTokens: 512, HasMaxTokens: true, Temperature: 0.5, HasTemperature: true, TopP: 0.9, HasTopP: true}},
		{"invoke Anthropic", bedrockInvokePath,
			`{"anthropic_version":"bedrock-2023-05-31","max_tokens":1024,"temperature":0.7,"top_p":0.95,"messages":[]}`,
			Request{MaxTokens: 1024, HasMaxTokens: true, Temperature: 0.7, HasTemperature: true, TopP: 0.95, HasTopP: true}},
		{"invoke Llama", "/model/meta.llama3-8b-instruct-v1:0/invoke",
			`{"prompt":"hi","max_gen_len":256,"temperature":0.2}`,
			Request{MaxTokens: 256, HasMaxTokens: true, Temperature: 0.2, HasTemperature: true}},
		{"invoke Titan", "/model/amazon.titan-text-express-v1/invoke",
			`{"inputText":"hi","textGenerationConfig":{"maxTokenCount":300,"temperature":0,"topP":1}}`,
			Request{MaxTokens: 300, HasMaxTokens: true, HasTemperature: true, TopP: 1, HasTopP: true}},
		{"converse ignores native names", bedrockConversePath, `{"max_tokens":10}`, Request{}},
		{"not JSON", bedrockConversePath, `max_tokens=10`, Request{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			DetectDialect(tt.path).New().Request(&r, tt.path, []byte(tt.body))
			// The path's part is tested in TestBedrockPaths.
			r.Model, r.Stream, r.HasStream = "", false, false
			if !reflect.DeepEqual(r, tt.want) {
				t.Errorf("got %+v, want %+v", r, tt.want)
			}
		})
	}
}

// bedrockPathFor picks the dialect a fixture is for by its name.
func bedrockPathFor(fixture string) string {
	if filepath.Base(fixture)[:6] == "invoke" {
		return bedrockInvokePath
	}
	return bedrockConversePath
}

// TestBedrockSplitInvariance: however the bytes are cut into writes, the
// measurement is the same. Every split point of every fixture, then random
// multi-way splits.
func TestBedrockSplitInvariance(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "bedrock", "*.bin"))
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	rnd := rand.New(rand.NewPCG(3, 4))
	for _, f := range files {
		body := testdata(t, "bedrock", filepath.Base(f))
		path := bedrockPathFor(f)
		run := func(cuts []int) Measurement {
			mt := bedrockMeter(t, path, Options{})
			prev := 0
			for _, c := range append(cuts, len(body)) {
				mt.Write(body[prev:c], t0.Add(step))
				prev = c
			}
			return *mt.Finish(t0.Add(step), OutcomeUnknown, "")
		}
		whole := run(nil)
		for c := 0; c <= len(body); c++ {
			if got := run([]int{c}); !reflect.DeepEqual(got, whole) {
				t.Fatalf("%s: split at %d differs:\n got %+v\nwant %+v", f, c, got, whole)
			}
		}
		for range 30 {
			var cuts []int
			for c := 0; c < len(body); c += 1 + rnd.IntN(80) {
				cuts = append(cuts, c)
			}
			if got := run(cuts); !reflect.DeepEqual(got, whole) {
				t.Fatalf("%s: random split differs:\n got %+v\nwant %+v", f, got, whole)
			}
		}
	}
}

// bedrockStream encodes messages into a stream, for one-off cases.
func bedrockStream(t testing.TB, msgs ...aws.Message) []byte {
	t.Helper()
	return bedrockFixture{msgs: msgs}.encode(t)
}

func TestBedrockDegradation(t *testing.T) {
	tests := []struct {
		name     string
		path     string
		stream   []byte
		opts     Options
		degraded int64
		reason   string
		tokens   int64 // OutputEvents
	}{
		{
			name: "chunk without bytes", path: bedrockInvokePath,
			stream: bedrockStream(t, bedrockEvent("chunk", `{"p":"abc"}`)), degraded: 1, reason: "chunk_without_bytes",
		},
		{
			name: "chunk bytes not base64", path: bedrockInvokePath,
			stream: bedrockStream(t, bedrockEvent("chunk", `{"bytes":"%%%not base64","p":"abc"}`)), degraded: 1, reason: "chunk_not_base64",
		},
		{
			name: "chunk bytes not JSON", path: bedrockInvokePath,
			stream: bedrockStream(t, bedrockEvent("chunk", `{"bytes":"`+base64.StdEncoding.EncodeToString([]byte("plain text"))+`"}`)), degraded: 1, reason: "chunk_not_json",
		},
		{
			name: "unpadded base64 is still read", path: bedrockInvokePath,
			stream: bedrockStream(t, bedrockEvent("chunk", `{"bytes":"`+base64.RawStdEncoding.EncodeToString([]byte(`{"type":"content_block_delta","delta":{"type":"text_delta","text":"ok"}}`))+`"}`)),
			tokens: 1,
		},
		{
			name: "payload not JSON", path: bedrockConversePath,
			stream: bedrockStream(t, bedrockEvent("contentBlockDelta", `text`)), degraded: 1, reason: "event_not_json",
		},
		{
			name: "unknown event types are chunks, not faults", path: bedrockConversePath,
			stream: bedrockStream(t, bedrockEvent("somethingNew", `{"p":"a"}`), bedrockEvent("chunk", `{"bytes":""}`)),
		},
		{
			name: "oversized message skipped, the next one read", path: bedrockConversePath, opts: Options{MaxEventSize: 300},
			stream: bedrockStream(t,
				bedrockEvent("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"`+string(make([]byte, 400))+`"}}`),
				bedrockEvent("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"after"}}`)),
			degraded: 1, reason: "event_over_cap", tokens: 1,
		},
		{
			name: "an HTML page labelled as an event stream", path: bedrockConversePath,
			stream: []byte("<html><body><h1>504 Gateway Time-out</h1></body></html>\n"), degraded: 1, reason: "eventstream_corrupt",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mt := bedrockMeter(t, tt.path, tt.opts)
			mt.Write(tt.stream, t0.Add(step))
			m := mt.Finish(t0.Add(2*step), OutcomeUnknown, "")
			if m.Degraded != tt.degraded || m.DegradedReason != tt.reason || m.OutputEvents != tt.tokens {
				t.Errorf("Degraded %d %q OutputEvents %d, want %d %q %d", m.Degraded, m.DegradedReason, m.OutputEvents, tt.degraded, tt.reason, tt.tokens)
			}
		})
	}
}

// TestBedrockEventAllocations: once warm, reading a message allocates
// nothing, for both dialects, the base64 decoding included.
func TestBedrockEventAllocations(t *testing.T) {
	tests := []struct {
		name, path, fixture string
		warm, event         int
	}{
		{"converse text delta", bedrockConversePath, "converse_text.bin", 3, 3},
		{"converse tool input delta", bedrockConversePath, "converse_reasoning_tool.bin", 9, 8},
		{"converse metadata", bedrockConversePath, "converse_text.bin", 7, 6},
		{"invoke Anthropic text delta", bedrockInvokePath, "invoke_anthropic.bin", 4, 3},
		{"invoke Anthropic message_stop with metrics", bedrockInvokePath, "invoke_anthropic.bin", 7, 6},
		{"invoke Anthropic escaped partial_json", bedrockInvokePath, "invoke_anthropic_thinking_tools.bin", 9, 8},
		{"invoke Llama generation", "/model/meta.llama3-1-8b-instruct-v1:0/invoke-with-response-stream", "invoke_llama.bin", 3, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frames := bedrockFrames(testdata(t, "bedrock", tt.fixture))
			mt := bedrockMeter(t, tt.path, Options{})
			for _, f := range frames[:tt.warm] {
				mt.Write(f, t0.Add(step))
			}
			ev := frames[tt.event]
			// Split too, so the decoder's buffer is exercised.
			allocs := testing.AllocsPerRun(1000, func() {
				mt.Write(ev[:20], t0.Add(step))
				mt.Write(ev[20:], t0.Add(step))
				mt.Write(ev, t0.Add(step))
			})
			if allocs != 0 {
				t.Errorf("%v allocations per event, want 0", allocs)
			}
		})
	}
}

// TestBedrockInvokeFamilies: the families of which no recording was found,
// in the shapes AWS documents for them (bedrock_fixtures_test.go), read
// chunk by chunk as the recorded families are (TestRecordedBedrockInvoke).
func TestBedrockInvokeFamilies(t *testing.T) {
	streams := []dialectCase{
		{
			name: "Mistral text completion: outputs[].text, stop_reason, counts from the metrics", path: "/model/mistral.mistral-large-2402-v1:0/invoke-with-response-stream", fixture: "invoke_mistral.bin",
			firstToken: 0, firstVisible: 0, lastToken: 1,
			usage:  Usage{15, 6, -1, -1, -1, UsageReported},
			finish: []string{"stop"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"invocation_latency", 0.301}, {"first_byte_latency", 0.102}}, chunks: 3,
		},
		{
			name: "DeepSeek-R1: choices[].text and stop_reason; its <think> text is text", path: "/model/us.deepseek.r1-v1:0/invoke-with-response-stream", fixture: "invoke_deepseek.bin",
			firstToken: 0, firstVisible: 0, lastToken: 1,
			usage:  Usage{9, 14, -1, -1, -1, UsageReported},
			finish: []string{"stop"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"invocation_latency", 0.812}, {"first_byte_latency", 0.42}}, chunks: 3,
		},
		{
			name: "gpt-oss: OpenAI chunks read as openai_chat reads them; usage in the last one", path: "/model/openai.gpt-oss-20b-1:0/invoke-with-response-stream", fixture: "invoke_gpt_oss.bin",
			firstToken: 1, firstVisible: 1, lastToken: 2,
			usage: Usage{71, 17, -1, -1, -1, UsageReported}, model: "openai.gpt-oss-20b-1:0", id: "chatcmpl-7f1e",
			finish: []string{"stop"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"invocation_latency", 0.655}, {"first_byte_latency", 0.233}}, chunks: 4,
		},
		{
			name: "Cohere Command R: text-generation events; stream-end's nested response is not text", path: "/model/cohere.command-r-v1:0/invoke-with-response-stream", fixture: "invoke_cohere_command_r.bin",
			firstToken: 1, firstVisible: 1, lastToken: 2,
			usage:  Usage{4, 3, -1, -1, -1, UsageReported},
			finish: []string{"COMPLETE"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"invocation_latency", 0.24}, {"first_byte_latency", 0.098}}, chunks: 4,
		},
		{
			name: "Cohere Command: text until is_finished, whose repeat of the text is no token", path: "/model/cohere.command-text-v14/invoke-with-response-stream", fixture: "invoke_cohere_command.bin",
			firstToken: 0, firstVisible: 0, lastToken: 1,
			usage:  Usage{3, 3, -1, -1, -1, UsageReported},
			finish: []string{"COMPLETE"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"invocation_latency", 0.199}, {"first_byte_latency", 0.087}}, chunks: 3,
		},
		{
			name: "Claude Text Completions: completion and stop_reason", path: "/model/anthropic.claude-instant-v1/invoke-with-response-stream", fixture: "invoke_claude_text.bin",
			firstToken: 0, firstVisible: 0, lastToken: 1,
			usage:  Usage{12, 3, -1, -1, -1, UsageReported},
			finish: []string{"stop_sequence"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"invocation_latency", 0.45}, {"first_byte_latency", 0.3}}, chunks: 2,
		},
		{
			name: "Titan over two chunks: null total and reason are neither counts nor the end", path: "/model/amazon.titan-text-express-v1/invoke-with-response-stream", fixture: "invoke_titan.bin",
			firstToken: 0, firstVisible: 0, lastToken: 1,
			usage:  Usage{9, 6, -1, -1, -1, UsageReported},
			finish: []string{"FINISH"}, outcome: OutcomeCompleted,
			timings: []ServerTiming{{"invocation_latency", 0.41}, {"first_byte_latency", 0.205}}, chunks: 2,
		},
		{
			name: "a chunk of no known family is a counted fault; the metrics still give the counts", path: "/model/example.new-model-v1:0/invoke-with-response-stream", fixture: "invoke_unknown.bin",
			firstToken: -1, firstVisible: -1, lastToken: -1,
			usage:   Usage{3, 2, -1, -1, -1, UsageReported},
			outcome: OutcomeCompleted, degraded: "invoke_chunk_unknown",
			timings: []ServerTiming{{"invocation_latency", 0.12}, {"first_byte_latency", 0.06}}, chunks: 2,
		},
	}
	for _, tt := range streams {
		t.Run(tt.name, func(t *testing.T) {
			m := replayPieces(bedrockMeter(t, tt.path, Options{}), bedrockFrames(testdata(t, "bedrock", tt.fixture)))
			checkStream(t, m, tt)
		})
	}
	t.Run("Titan cut after its first chunk is truncated, its input known", func(t *testing.T) {
		frames := bedrockFrames(testdata(t, "bedrock", "invoke_titan.bin"))
		m := replayPieces(bedrockMeter(t, "/model/amazon.titan-text-express-v1/invoke-with-response-stream", Options{}), frames[:1])
		if m.Outcome != OutcomeTruncated || m.Usage.InputTokens != 9 || m.Usage.Source != UsageEstimated {
			t.Errorf("outcome %v, Usage %+v", m.Outcome, m.Usage)
		}
	})
	bodies := []dialectCase{
		{
			name: "Jamba: the OpenAI shape, usage and finish_reason", path: "/model/ai21.jamba-1-5-mini-v1:0/invoke", fixture: "invoke_jamba.json",
			usage: Usage{17, 9, -1, -1, -1, UsageReported}, model: "jamba-1.5-mini", id: "chatcmpl-8a2c4e",
			finish: []string{"stop"}, outcome: OutcomeCompleted,
		},
		{
			name: "Mistral Large 2407 chat: a tool call, stop_reason; no counts, estimated", path: "/model/mistral.mistral-large-2407-v1:0/invoke", fixture: "invoke_mistral_chat.json",
			usage:  Usage{-1, 13, -1, -1, -1, UsageEstimated},
			finish: []string{"tool_calls"}, outcome: OutcomeCompleted,
		},
		{
			name: "DeepSeek-R1 body: choices[].text, stop_reason", path: "/model/us.deepseek.r1-v1:0/invoke", fixture: "invoke_deepseek.json",
			usage:  Usage{-1, 13, -1, -1, -1, UsageEstimated},
			finish: []string{"stop"}, outcome: OutcomeCompleted,
		},
	}
	for _, tt := range bodies {
		t.Run(tt.name, func(t *testing.T) {
			mt := exchange{200, "application/json", tt.path}.start(DetectDialect(tt.path).New(), Options{}, nil)
			checkBody(t, readInPieces(mt, testdata(t, "bedrock", tt.fixture), 64), tt)
		})
	}
}

// TestBedrockInvokeShapesWithoutText: bodies that hold no generated text
// but a known shape (an embedding) are read without a fault; a body of no
// known shape is one, counted, unless it answers an error status.
func TestBedrockInvokeShapesWithoutText(t *testing.T) {
	tests := []struct {
		name, path, fixture string
		status              int
		header              http.Header
		usage               Usage
		degraded            string
	}{
		{"Titan embedding: its input count", "/model/amazon.titan-embed-text-v2:0/invoke", "invoke_titan_embed.json", 200, nil,
			Usage{7, -1, -1, -1, -1, UsageReported}, ""},
		{"unknown body: degraded, its headers' counts kept", "/model/example.new-model-v1:0/invoke", "invoke_unknown.json", 200,
			http.Header{"X-Amzn-Bedrock-Input-Token-Count": {"4"}, "X-Amzn-Bedrock-Output-Token-Count": {"2"}},
			Usage{4, 2, -1, -1, -1, UsageReported}, "invoke_body_unknown"},
		{"unknown body on an error status: no fault", "/model/example.new-model-v1:0/invoke", "invoke_unknown.json", 500, nil,
			Usage{-1, -1, -1, -1, -1, UsageAbsent}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := readInPieces(invokeExchange(tt.path, tt.status, "application/json", tt.header), testdata(t, "bedrock", tt.fixture), 64)
			if m.Usage != tt.usage || m.DegradedReason != tt.degraded {
				t.Errorf("Usage %+v degraded %q, want %+v %q", m.Usage, m.DegradedReason, tt.usage, tt.degraded)
			}
		})
	}
}

// TestBedrockInvokeCountPrecedence: field by field, the model's own count
// wins over Bedrock's invocation metrics, which win over the response
// headers, whatever order they arrive in.
func TestBedrockInvokeCountPrecedence(t *testing.T) {
	headers := http.Header{
		"X-Amzn-Bedrock-Input-Token-Count":  {"99"},
		"X-Amzn-Bedrock-Output-Token-Count": {"98"},
		"X-Amzn-Bedrock-Invocation-Latency": {"700"},
	}
	t.Run("body over headers", func(t *testing.T) {
		mt := invokeExchange("/model/meta.llama3-8b-instruct-v1:0/invoke", 200, "application/json", headers)
		m := readInPieces(mt, []byte(`{"generation":"Hi","prompt_token_count":11,"generation_token_count":8,"stop_reason":"stop"}`), 64)
		if want := (Usage{11, 8, -1, -1, -1, UsageReported}); m.Usage != want {
			t.Errorf("Usage %+v, want %+v", m.Usage, want)
		}
		if want := []ServerTiming{{"invocation_latency", 0.7}}; !reflect.DeepEqual(m.ServerTimings, want) {
			t.Errorf("ServerTimings %v, want %v", m.ServerTimings, want)
		}
	})
	t.Run("metrics over headers, in a stream without counts of its own", func(t *testing.T) {
		mt := invokeExchange("/model/mistral.mistral-7b-instruct-v0:2/invoke-with-response-stream", 200, bedrockMediaType, headers)
		m := replayPieces(mt, bedrockFrames(testdata(t, "bedrock", "invoke_mistral.bin")))
		if want := (Usage{15, 6, -1, -1, -1, UsageReported}); m.Usage != want {
			t.Errorf("Usage %+v, want %+v", m.Usage, want)
		}
		if want := []ServerTiming{{"invocation_latency", 0.301}, {"first_byte_latency", 0.102}}; !reflect.DeepEqual(m.ServerTimings, want) {
			t.Errorf("ServerTimings %v, want %v", m.ServerTimings, want)
		}
	})
	t.Run("model over metrics; metrics fill the cache count the model left out", func(t *testing.T) {
		stream := bedrockStream(t,
			bedrockChunk(`{"type":"message_start","message":{"id":"msg_bdrk_1","type":"message","role":"assistant","model":"claude-3-haiku-20240307","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}`, 3),
			bedrockChunk(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`, 5),
			bedrockChunk(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":12}}`, 7),
			bedrockChunk(`{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":40,"outputTokenCount":20,"cacheReadInputTokenCount":5,"invocationLatency":100,"firstByteLatency":50}}`, 9))
		m := replayPieces(invokeExchange(bedrockInvokePath, 200, bedrockMediaType, nil), bedrockFrames(stream))
		if want := (Usage{10 + 5, 12, 5, -1, -1, UsageReported}); m.Usage != want {
			t.Errorf("Usage %+v, want %+v", m.Usage, want)
		}
	})
	t.Run("headers kept when the body is over the cap", func(t *testing.T) {
		mt := New(DetectDialect(bedrockInvokePath).New(), Options{MaxBodySize: 10}, t0)
		mt.ResponseHeader(headers)
		mt.Response(200, "application/json", "")
		m := readInPieces(mt, testdata(t, "bedrock", "invoke_llama.json"), 64)
		if want := (Usage{99, 98, -1, -1, -1, UsageReported}); m.Usage != want || m.DegradedReason != "body_over_cap" {
			t.Errorf("Usage %+v degraded %q, want %+v body_over_cap", m.Usage, m.DegradedReason, want)
		}
	})
	t.Run("malformed headers are no counts", func(t *testing.T) {
		h := http.Header{"X-Amzn-Bedrock-Input-Token-Count": {"-3"}, "X-Amzn-Bedrock-Output-Token-Count": {"ten"}, "X-Amzn-Bedrock-Invocation-Latency": {"soon"}}
		mt := invokeExchange("/model/cohere.command-r-v1:0/invoke", 200, "application/json", h)
		m := readInPieces(mt, testdata(t, "recorded", "bedrock/invoke_cohere_command_r_body.json"), 64)
		if m.Usage.InputTokens != -1 || m.Usage.Source != UsageEstimated || m.ServerTimings != nil {
			t.Errorf("Usage %+v ServerTimings %v", m.Usage, m.ServerTimings)
		}
	})
}

// TestResponseHeaderAllocations: handing the header over allocates
// nothing, for a dialect that reads it (once its timing is recorded) and
// for one that does not.
func TestResponseHeaderAllocations(t *testing.T) {
	h := http.Header{"X-Amzn-Bedrock-Input-Token-Count": {"5"}, "X-Amzn-Bedrock-Output-Token-Count": {"10"}, "X-Amzn-Bedrock-Invocation-Latency": {"223"}}
	for _, path := range []string{bedrockInvokePath, "/v1/chat/completions"} {
		mt := New(DetectDialect(path).New(), Options{}, t0)
		mt.ResponseHeader(h)
		if allocs := testing.AllocsPerRun(1000, func() { mt.ResponseHeader(h) }); allocs != 0 {
			t.Errorf("%s: %v allocations, want 0", path, allocs)
		}
	}
}

// TestBedrockInvokeEventAllocations: once warm, reading a chunk of each
// family allocates nothing, its base64 decoding included.
func TestBedrockInvokeEventAllocations(t *testing.T) {
	tests := []struct {
		name, path, dir, fixture string
		warm, event              int
	}{
		{"Nova text delta", "/model/amazon.nova-micro-v1:0/invoke-with-response-stream", "recorded", "bedrock/invoke_nova_micro_stream.bin", 3, 3},
		{"Nova tool call start", "/model/amazon.nova-micro-v1:0/invoke-with-response-stream", "recorded", "bedrock/invoke_nova_micro_tool_call_stream.bin", 49, 49},
		{"Nova metadata with the metrics", "/model/amazon.nova-micro-v1:0/invoke-with-response-stream", "recorded", "bedrock/invoke_nova_micro_tool_call_stream.bin", 56, 56},
		{"Titan chunk", "/model/amazon.titan-text-express-v1/invoke-with-response-stream", "recorded", "bedrock/invoke_titan_text_express_guardrail_stream.bin", 1, 1},
		{"Titan last chunk", "/model/amazon.titan-text-express-v1/invoke-with-response-stream", "recorded", "bedrock/invoke_titan_text_express_guardrail_stream.bin", 2, 2},
		{"Mistral outputs", "/model/mistral.mistral-large-2402-v1:0/invoke-with-response-stream", "bedrock", "invoke_mistral.bin", 1, 1},
		{"DeepSeek choices text", "/model/us.deepseek.r1-v1:0/invoke-with-response-stream", "bedrock", "invoke_deepseek.bin", 1, 1},
		{"gpt-oss delta", "/model/openai.gpt-oss-20b-1:0/invoke-with-response-stream", "bedrock", "invoke_gpt_oss.bin", 2, 2},
		{"gpt-oss last chunk with usage", "/model/openai.gpt-oss-20b-1:0/invoke-with-response-stream", "bedrock", "invoke_gpt_oss.bin", 3, 3},
		{"Cohere Command R text-generation", "/model/cohere.command-r-v1:0/invoke-with-response-stream", "bedrock", "invoke_cohere_command_r.bin", 2, 2},
		{"Cohere Command text", "/model/cohere.command-text-v14/invoke-with-response-stream", "bedrock", "invoke_cohere_command.bin", 1, 1},
		{"Claude Text Completions", "/model/anthropic.claude-instant-v1/invoke-with-response-stream", "bedrock", "invoke_claude_text.bin", 1, 0},
		{"Claude message_delta", bedrockInvokePath, "recorded", "bedrock/invoke_claude_3_5_sonnet_tool_call_stream.bin", 24, 24},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frames := bedrockFrames(testdata(t, tt.dir, tt.fixture))
			mt := bedrockMeter(t, tt.path, Options{})
			for _, f := range frames[:tt.warm] {
				mt.Write(f, t0.Add(step))
			}
			ev := frames[tt.event]
			allocs := testing.AllocsPerRun(1000, func() {
				mt.Write(ev[:20], t0.Add(step))
				mt.Write(ev[20:], t0.Add(step))
				mt.Write(ev, t0.Add(step))
			})
			if allocs != 0 {
				t.Errorf("%v allocations per event, want 0", allocs)
			}
		})
	}
}

// bedrockInvokeEscapes are chunks of every InvokeModel family whose strings
// are full of JSON escapes in every place the family is read: text, tool
// input, finish reasons (jsonraw_alloc_test.go explains why escapes matter).
func bedrockInvokeEscapes() []escapeDialect {
	usage := func(m *Measurement) bool { return m.Usage.Source == UsageReported }
	finished := func(m *Measurement) bool { return len(m.FinishReasons) > 0 && m.FinishReasons[0] != "" }
	text := `"line\nbreak \"q\" caf\u00e9"`
	return []escapeDialect{
		{
			name: "Nova", path: "/model/amazon.nova-micro-v1:0/invoke-with-response-stream", contentType: bedrockMediaType,
			events: []escapeEvent{
				{name: "text delta", output: true, event: escapedChunk(`{"contentBlockDelta":{"delta":{"text":`+text+`},"contentBlockIndex":0}}`, false)},
				{name: "tool start", output: true, event: escapedChunk(`{"contentBlockStart":{"start":{"toolUse":{"toolUseId":"t\"1","name":"get\u005fweather"}},"contentBlockIndex":1}}`, false)},
				{name: "tool input", output: true, event: escapedChunk(`{"contentBlockDelta":{"delta":{"toolUse":{"input":"{\"city\":\"Paris\"}"}},"contentBlockIndex":1}}`, false)},
				{name: "messageStop", check: finished, event: escapedChunk(`{"messageStop":{"stopReason":"end\u005fturn"}}`, false)},
				{name: "metadata with metrics", check: usage, event: escapedChunk(`{"metadata":{"usage":{"inputTokens":5,"outputTokens":10,"cacheReadInputTokenCount":0,"cacheWriteInputTokenCount":0},"metrics":{},"trace":{"x":"\"y\""}},"amazon-bedrock-invocationMetrics":{"inputTokenCount":5,"outputTokenCount":10,"invocationLatency":181,"firstByteLatency":59}}`, true)},
			},
		},
		{
			name: "Titan", path: "/model/amazon.titan-text-express-v1/invoke-with-response-stream", contentType: bedrockMediaType,
			events: []escapeEvent{
				{name: "outputText", output: true, event: escapedChunk(`{"outputText":`+text+`,"index":0,"totalOutputTextTokenCount":null,"completionReason":null,"inputTextTokenCount":9}`, false)},
				{name: "last chunk", output: true, check: finished, event: escapedChunk(`{"outputText":`+text+`,"index":0.0,"totalOutputTextTokenCount":6.0,"completionReason":"FIN\u0049SH","amazon-bedrock-guardrailAction":"INTERVENED"}`, true)},
			},
		},
		{
			name: "Llama", path: "/model/meta.llama3-8b-instruct-v1:0/invoke-with-response-stream", contentType: bedrockMediaType,
			events: []escapeEvent{
				{name: "generation", output: true, check: usage, event: escapedChunk(`{"generation":`+text+`,"prompt_token_count":null,"generation_token_count":4,"stop_reason":null}`, false)},
				{name: "stop", check: finished, event: escapedChunk(`{"generation":"","prompt_token_count":null,"generation_token_count":6,"stop_reason":"st\u006fp"}`, false)},
			},
		},
		{
			name: "Mistral", path: "/model/mistral.mistral-7b-instruct-v0:2/invoke-with-response-stream", contentType: bedrockMediaType,
			events: []escapeEvent{
				{name: "outputs", output: true, check: finished, event: escapedChunk(`{"outputs":[{"text":`+text+`,"stop_reason":"l\u0065ngth"}]}`, false)},
			},
		},
		{
			name: "OpenAI shape", path: "/model/openai.gpt-oss-20b-1:0/invoke-with-response-stream", contentType: bedrockMediaType,
			events: []escapeEvent{
				{name: "delta content", output: true, event: escapedChunk(`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"openai.gpt-oss-20b-1:0","choices":[{"index":0,"delta":{"content":`+text+`},"finish_reason":null}]}`, false)},
				{name: "tool call arguments", output: true, event: escapedChunk(`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"openai.gpt-oss-20b-1:0","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}`, false)},
				{name: "DeepSeek text and stop_reason", output: true, check: finished, event: escapedChunk(`{"choices":[{"text":`+text+`,"stop_reason":"st\u006fp"}]}`, false)},
				{name: "usage", check: usage, event: escapedChunk(`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"openai.gpt-oss-20b-1:0","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`, false)},
			},
		},
		{
			name: "Cohere", path: "/model/cohere.command-r-v1:0/invoke-with-response-stream", contentType: bedrockMediaType,
			events: []escapeEvent{
				{name: "text-generation", output: true, event: escapedChunk(`{"is_finished":false,"event_type":"text-generation","text":`+text+`}`, false)},
				{name: "tool-calls-chunk", output: true, event: escapedChunk(`{"is_finished":false,"event_type":"tool-calls-chunk","tool_call_delta":{"index":0,"name":"get\u005fweather","parameters":"{\"city\":"}}`, false)},
				{name: "Command text", output: true, event: escapedChunk(`{"text":`+text+`,"is_finished":false}`, false)},
				{name: "stream-end", check: finished, event: escapedChunk(`{"is_finished":true,"event_type":"stream-end","finish_reason":"COMPL\u0045TE","response":{"text":"a\nb"}}`, false)},
			},
		},
		{
			name: "Claude Text Completions", path: "/model/anthropic.claude-instant-v1/invoke-with-response-stream", contentType: bedrockMediaType,
			events: []escapeEvent{
				{name: "completion", output: true, check: finished, event: escapedChunk(`{"completion":`+text+`,"stop_reason":"stop\u005fsequence","stop":"\n\nHuman:"}`, false)},
			},
		},
	}
}

// TestBedrockInvokeAllocationsWithEscapes: once warm, reading a chunk of
// any InvokeModel family allocates nothing, even when every string in it
// has escapes, as TestEventAllocationsWithEscapes checks for the dialects.
func TestBedrockInvokeAllocationsWithEscapes(t *testing.T) {
	for _, d := range bedrockInvokeEscapes() {
		for _, ev := range d.events {
			t.Run(d.name+"/"+ev.name, func(t *testing.T) {
				mt := escapeMeter(t, d)
				mt.Write(ev.event, t0.Add(step))
				before := mt.M.OutputEvents
				mt.Write(ev.event, t0.Add(step))
				if ev.output && mt.M.OutputEvents != before+1 {
					t.Fatalf("the chunk was not read as output: %+v", mt.M)
				}
				if ev.check != nil && !ev.check(&mt.M) {
					t.Fatalf("the chunk was not read: %+v", mt.M)
				}
				if mt.M.Degraded != 0 {
					t.Fatalf("degraded: %+v", mt.M)
				}
				if allocs := testing.AllocsPerRun(200, func() { mt.Write(ev.event, t0.Add(step)) }); allocs != 0 {
					t.Errorf("%v allocations per chunk, want 0", allocs)
				}
			})
		}
	}
}
